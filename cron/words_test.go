package cron

import "testing"

func TestDescribe(t *testing.T) {
	for spec, want := range map[string]string{
		"0 3 * * *":                      "at 03:00, every day",
		"0 0 3 * * *":                    "at 03:00, every day",
		"30 15 10 * * *":                 "at 10:15:30, every day",
		"0 9 * * 1-5":                    "at 09:00, on Monday through Friday",
		"0 9 * * MON-FRI":                "at 09:00, on Monday through Friday",
		"0 0 1 1 *":                      "at 00:00, on day 1 of the month, in January",
		"0 12 1,15 * *":                  "at 12:00, on days 1 and 15 of the month",
		"0 12 13 * 5":                    "at 12:00, on day 13 of the month or on Friday",
		"0 8 * 6-8 0,6":                  "at 08:00, on Sunday and Saturday, in June through August",
		"*/5 * * * *":                    "every 5 minutes, every day",
		"0 */5 * * * *":                  "every 5 minutes, every day",
		"*/10 * * * * *":                 "every 10 seconds, every day",
		"* * * * * *":                    "every second, every day",
		"* * * * *":                      "every minute, every day",
		"30 * * * * *":                   "at second 30 of every minute, every day",
		"30 * * * *":                     "at minute 30 of every hour, every day",
		"0,30 * * * *":                   "at minutes 0 and 30 of every hour, every day",
		"0 9-17 * * 1-5":                 "at minute 0 of hours 9 through 17, on Monday through Friday",
		"0 */2 * * *":                    "at minute 0 of every 2 hours, every day",
		"* 9 * * *":                      "every minute of hour 9, every day",
		"@daily":                         "at 00:00 every day",
		"@hourly":                        "at minute 0 of every hour",
		"@every 5m":                      "every 5m",
		"CRON_TZ=Europe/Paris 0 3 * * *": "at 03:00, every day (Europe/Paris time)",
		"TZ=UTC @weekly":                 "at 00:00 every Sunday (UTC time)",
		"0 0 10-20/2 * * *":              "", // a stepped range: the spec says it better
		"nope":                           "",
		"0 0 30 2 *":                     "", // never fires
	} {
		if got := Describe(spec); got != want {
			t.Errorf("Describe(%q) = %q, want %q", spec, got, want)
		}
	}
}
