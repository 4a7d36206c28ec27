package proto

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf: the module version, with the commit and whether the tree was modified
// when Go recorded them, unless the version (a pseudo-version) names the commit already.
func TestVersionOf(t *testing.T) {
	rev := "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	for _, tc := range []struct {
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3"},
		{"(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, "(devel) (rev 1a2b3c4d5e6f)"},
		{"(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}, "(devel) (rev 1a2b3c4d5e6f, modified)"},
		{"v0.0.0-20261206050000-1a2b3c4d5e6f+dirty", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}},
			"v0.0.0-20261206050000-1a2b3c4d5e6f+dirty"},
		{"", nil, ""},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		if got := VersionOf(bi); got != tc.want {
			t.Errorf("VersionOf(%q, %v) = %q, want %q", tc.version, tc.settings, got, tc.want)
		}
	}
}
