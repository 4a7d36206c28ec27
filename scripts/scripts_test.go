package scripts

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// transitions returns the embedded .lua files that are scripts of their own (all but the
// lib's, in lib/, which are prepended to each), sorted.
func transitions(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		t.Fatalf("fs.Glob(*.lua) err = %v", err)
	}
	if len(names) == 0 {
		t.Fatal("no embedded .lua files besides the lib's, want one per transition")
	}
	return names
}

// header returns the text of the comment lines a file opens with (without "--" and one
// following space), up to its first line that is not a comment.
func header(t *testing.T, name string) []string {
	t.Helper()
	src, err := files.ReadFile(name)
	if err != nil {
		t.Fatalf("ReadFile(%s) err = %v", name, err)
	}
	var lines []string
	for _, line := range strings.Split(string(src), "\n") {
		text, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "--")
		if !ok {
			break
		}
		lines = append(lines, strings.TrimPrefix(text, " "))
	}
	return lines
}

func TestScriptsHaveContractHeader(t *testing.T) {
	t.Parallel()
	// Each label starts a header line: the key and argument list, the replies, the clock
	// the script reads, and the invariant it keeps (STYLE.md, rule 2).
	labels := []string{"KEYS[", "ARGV[", "Returns", "Clock", "Invariant"}
	for _, name := range transitions(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := header(t, name)
			if len(h) == 0 {
				t.Fatalf("%s: first line is not a Lua comment, want a contract header", name)
			}
			for _, label := range labels {
				found := slices.ContainsFunc(h, func(line string) bool {
					return strings.HasPrefix(line, label)
				})
				if !found {
					t.Errorf("%s: header has no line starting with %q, want one (header:\n%s)",
						name, label, strings.Join(h, "\n"))
				}
			}
		})
	}
}

func TestScriptKeysShareQueueHashTag(t *testing.T) {
	t.Parallel()
	for _, name := range transitions(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := 0
			tags := map[string]bool{}
			for _, line := range header(t, name) {
				if !strings.HasPrefix(line, "KEYS[") {
					continue
				}
				n++
				// "KEYS[1]  jobs:{q}:active  ZSET ...": the second field is the key pattern.
				fields := strings.Fields(line)
				var pattern string
				if len(fields) > 1 {
					pattern = fields[1]
				}
				// A queue's scripts keep to its slot ({q}); the registry's to {registry}, the
				// audit log's to {audit}.
				tag := ""
				if i, j := strings.Index(pattern, "{"), strings.Index(pattern, "}"); i >= 0 && j > i {
					tag = pattern[i : j+1]
				}
				if tag != "{q}" && tag != "{registry}" && tag != "{audit}" {
					t.Errorf("%s: header line %q names key pattern %q, want one with the {q} (or "+
						"{registry}, {audit}) hash tag (every key of a script must be in one cluster slot)", name, line, pattern)
				}
				if tags[tag] = true; len(tags) > 1 {
					t.Errorf("%s: header names keys with hash tags %v, want one: a script touches one slot", name, tags)
				}
			}
			if n == 0 {
				t.Errorf("%s: header names %d KEYS[...] lines, want at least 1", name, n)
			}
		})
	}
}

func TestEveryFileHasScriptInAll(t *testing.T) {
	t.Parallel()
	hashes := make(map[string]bool, len(All))
	for i, s := range All {
		if s == nil {
			t.Fatalf("All[%d] = nil, want a *redis.Script", i)
		}
		hashes[s.Hash()] = true
	}
	names := transitions(t)
	for _, name := range names {
		src, err := Source(name)
		if err != nil {
			t.Errorf("Source(%q) err = %v, want nil", name, err)
			continue
		}
		if want := redis.NewScript(src).Hash(); !hashes[want] {
			t.Errorf("All has no script with the source of %s (SHA1 %s), want an exported "+
				"*redis.Script for it listed in All", name, want)
		}
	}
	if got, want := len(hashes), len(names); got != want {
		t.Errorf("All holds %d distinct scripts, want %d (one per .lua file but the lib's: %v)",
			got, want, names)
	}
}

func TestScriptsLoadOnRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	// Name each script by its file for the messages.
	byHash := map[string]string{}
	for _, name := range transitions(t) {
		if src, err := Source(name); err == nil {
			byHash[redis.NewScript(src).Hash()] = name
		}
	}
	for i, s := range All {
		name, ok := byHash[s.Hash()]
		if !ok {
			name = fmt.Sprintf("All[%d]", i)
		}
		got, err := s.Load(ctx, rdb).Result()
		if err != nil {
			t.Errorf("%s: SCRIPT LOAD err = %v, want nil", name, err)
			continue
		}
		if want := s.Hash(); got != want {
			t.Errorf("%s: SCRIPT LOAD = %s, want %s", name, got, want)
		}
	}
}

// Each script carries the lib's functions it calls, through one another too (to_dead
// calls trim), and no other: an unused one would still be created on every call.
func TestSourceCarriesTheLibFunctionsItCalls(t *testing.T) {
	t.Parallel()
	lib, err := readLib()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(lib, "\n") {
		if rest, ok := strings.CutPrefix(line, "local function "); ok {
			name, _, _ := strings.Cut(rest, "(")
			names = append(names, name)
		}
	}
	for _, name := range transitions(t) {
		src, err := Source(name)
		if err != nil {
			t.Fatalf("Source(%q) err = %v", name, err)
		}
		own, _ := files.ReadFile(name)
		for _, fn := range names {
			defined := strings.Contains(src, "local function "+fn+"(")
			// Calls outside the definition itself.
			used := calls(strings.ReplaceAll(src, "local function "+fn+"(", ""), fn)
			if used != defined {
				t.Errorf("%s: %s called %v, defined %v; want a definition exactly when called", name, fn, used, defined)
			}
		}
		// The file itself, with the lib's functions at its marker line or before it.
		before, after, marked := strings.Cut(string(own), "\n"+libMarker)
		if !marked && !strings.HasSuffix(src, string(own)) ||
			marked && (!strings.HasPrefix(src, before+"\n") || !strings.HasSuffix(src, "\n"+after)) {
			t.Errorf("Source(%q) is not the file itself with the lib's functions before it or at its marker", name)
		}
	}
	if src, _ := Source("enqueue.lua"); strings.Contains(src, "local function trim(") || !strings.Contains(src, "local function now_us(") {
		t.Errorf("enqueue.lua's source has trim or lacks now_us:\n%s", src)
	}
	// enqueue.lua hands a job off without a claim's machinery: none of it is in its text.
	if src, _ := Source("enqueue.lua"); strings.Contains(src, "local function claim_jobs(") ||
		strings.Contains(src, "local function pop_keyed(") || !strings.Contains(src, "local function hand_entry(") {
		t.Errorf("enqueue.lua's source carries claim_jobs or pop_keyed, or lacks hand_entry:\n%s", src)
	}
	if src, _ := Source("fail.lua"); !strings.Contains(src, "local function trim(") {
		t.Errorf("fail.lua's source lacks trim, which its to_dead calls")
	}
}
