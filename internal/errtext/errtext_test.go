package errtext

import "testing"

func TestSummary(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"boom", "boom"},
		{"  boom \n", "boom"},
		{"exit status 1\nstderr:\nwarming up\nerror: disk full\n", "error: disk full"},
		{"panic: nil map\ngoroutine 7 [running]:\nmain.f()", "panic: nil map"},
		{"", ""},
	} {
		if got := Summary(tc.in); got != tc.want {
			t.Errorf("Summary(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
