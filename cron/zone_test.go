package cron

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// zoneProbeSpecs are the specs the zone probe prints the next tick of, after zoneProbeFrom.
var zoneProbeSpecs = []string{"0 30 3 * * *", "0 0 12 * * MON", "@daily", "*/15 * * * *"}

const zoneProbeFrom = "2026-12-06T10:00:00Z"

// A spec without CRON_TZ means the same instants on every scheduler, whatever its host's
// zone: UTC. Read in each host's local zone, schedulers in Kolkata and New York fired
// "0 30 3 * * *" at 22:00Z and 08:30Z, each tick a job of its own. The probe runs in
// child processes with TZ set, as a host's zone is.
func TestSpecWithoutZoneIsUTCOnEveryHost(t *testing.T) {
	t.Parallel()
	want := zoneProbe(t)
	for _, tz := range []string{"Asia/Kolkata", "America/New_York", "UTC"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestZoneProbe$", "-test.v")
		cmd.Env = append(os.Environ(), "TZ="+tz, "JOBS_ZONE_PROBE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe under TZ=%s: %v\n%s", tz, err, out)
		}
		got := probeLines(string(out))
		if got != want {
			t.Errorf("next ticks under TZ=%s:\n%s\nwant (UTC):\n%s", tz, got, want)
		}
	}
	if !strings.Contains(want, "0 30 3 * * * -> 2026-12-07T03:30:00Z") {
		t.Errorf("next ticks:\n%s\nwant 0 30 3 * * * at 03:30Z", want)
	}
}

// TestZoneProbe prints the next ticks of zoneProbeSpecs under the process's zone; it runs
// only as TestSpecWithoutZoneIsUTCOnEveryHost's child.
func TestZoneProbe(t *testing.T) {
	if os.Getenv("JOBS_ZONE_PROBE") != "1" {
		t.Skip("run by TestSpecWithoutZoneIsUTCOnEveryHost")
	}
	for line := range strings.Lines(zoneProbe(t)) {
		fmt.Print("probe: " + line)
	}
}

func zoneProbe(t *testing.T) string {
	from, _ := time.Parse(time.RFC3339, zoneProbeFrom)
	var b strings.Builder
	for _, spec := range zoneProbeSpecs {
		s, err := parseSchedule(spec)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "probe: %s -> %s\n", spec, s.Next(from.In(time.Local)).UTC().Format(time.RFC3339))
	}
	return probeLines(b.String())
}

// probeLines keeps the probe's lines of out, without their marker.
func probeLines(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "probe: "); ok {
			b.WriteString(rest)
		}
	}
	return b.String()
}
