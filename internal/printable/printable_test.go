package printable

import "testing"

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		in   string
		keep bool
		want string
	}{
		{"plain <b> & \\ text", false, "plain <b> & \\ text"},
		{"\x1b[31mred\x07", false, `\x1b[31mred\a`},
		{"a\nb\tc", false, `a\nb\tc`},
		{"a\nb", true, "a\nb"},
		{"\u202eevil", false, `\u202eevil`},
		{"\xff\xfeok", false, `\xff\xfeok`},
		{"héllo 日本", false, "héllo 日本"},
	} {
		if got := Escape(tc.in, tc.keep); got != tc.want {
			t.Errorf("Escape(%q, %v) = %q, want %q", tc.in, tc.keep, got, tc.want)
		}
	}
}
