package dash

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestVendoredFiles checks that every file under static/vendor is listed in VENDORED.md
// with the sha256 it has, so a vendored library changes only on purpose and each one
// keeps its version and licence written down.
func TestVendoredFiles(t *testing.T) {
	const dir = "static/vendor"
	doc, err := os.ReadFile(filepath.Join(dir, "VENDORED.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A table row: | file | package | version | licence | sha256 |
	row := regexp.MustCompile(`(?m)^\| ([^ |]+) \|.*\| ([0-9a-f]{64}) \|$`)
	listed := map[string]string{}
	for _, m := range row.FindAllSubmatch(doc, -1) {
		listed[string(m[1])] = string(m[2])
	}
	if len(listed) == 0 {
		t.Fatalf("VENDORED.md lists no file with its sha256")
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "VENDORED.md" {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		got := hex.EncodeToString(sum[:])
		want, ok := listed[rel]
		switch {
		case !ok:
			t.Errorf("%s is not listed in VENDORED.md (its sha256 is %s)", rel, got)
		case got != want:
			t.Errorf("%s has sha256 %s, VENDORED.md says %s", rel, got, want)
		}
		delete(listed, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range listed {
		t.Errorf("VENDORED.md lists %s, which is not under %s", f, dir)
	}
}
