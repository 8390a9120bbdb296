package toolrun

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
)

// newApp is a fake tool: ipu-fake IN -o OUT [--tiles N]. The input name
// selects a behaviour.
func newApp() *cli.App {
	return &cli.App{
		Name:      "ipu-fake",
		Usage:     "exercise the harness",
		ArgsUsage: "IN",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "output `FILE`", Required: true},
			&cli.IntFlag{Name: "tiles", Value: 1472},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return Usagef("want one input, got %d", c.NArg())
			}
			log := Logger(c)
			log.Debug("debugging")
			log.Info("hello", "tiles", c.Int("tiles"))
			switch in := c.Args().First(); in {
			case "panic":
				panic("boom\nsecond line")
			case "fail":
				return fmt.Errorf("read %s: bad header\nat byte 0x10", in)
			case "verdict":
				fmt.Fprintln(c.App.Writer, "hardwareTest=FAIL")
				return cli.Exit("", 1)
			default:
				fmt.Fprintf(c.App.Writer, "in=%s o=%s tiles=%d\n", in, c.String("o"), c.Int("tiles"))
				return nil
			}
		},
	}
}

// logTime matches the time at the start of a text log line.
var logTime = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z`)

// jsonTime matches the time field of a JSON log line.
var jsonTime = regexp.MustCompile(`"time":"[^"]*"`)

func TestMain(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        string // IPU_DEBUG
		wantStatus int
		wantStdout string
		wantStderr string
	}{
		{
			name:       "success",
			args:       []string{"-o", "out.plan", "--tiles", "4", "in.onnx"},
			wantStdout: "in=in.onnx o=out.plan tiles=4\n",
			wantStderr: "TIME  INFO hello tiles=4\n",
		},
		{
			name:       "flags after positional",
			args:       []string{"in.onnx", "-o", "out.plan", "--tiles=8"},
			wantStdout: "in=in.onnx o=out.plan tiles=8\n",
			wantStderr: "TIME  INFO hello tiles=8\n",
		},
		{
			name:       "dash-dash keeps dashed positional",
			args:       []string{"-o", "out", "--", "-in"},
			wantStdout: "in=-in o=out tiles=1472\n",
			wantStderr: "TIME  INFO hello tiles=1472\n",
		},
		{
			name:       "verbose",
			args:       []string{"-v", "-o", "x", "in"},
			wantStdout: "in=in o=x tiles=1472\n",
			wantStderr: "TIME DEBUG debugging\nTIME  INFO hello tiles=1472\n",
		},
		{
			name:       "json log",
			args:       []string{"--log-format", "json", "-o", "x", "in"},
			wantStdout: "in=in o=x tiles=1472\n",
			wantStderr: `{TIME,"level":"INFO","msg":"hello","tiles":1472}` + "\n",
		},
		{
			name:       "unknown flag",
			args:       []string{"-x", "in"},
			wantStatus: 2,
			wantStderr: "ipu-fake: flag provided but not defined: -x (run ipu-fake --help)\n",
		},
		{
			name:       "bad flag value",
			args:       []string{"--tiles", "many", "-o", "x", "in"},
			wantStatus: 2,
			wantStderr: `ipu-fake: invalid value "many" for flag -tiles: parse error (run ipu-fake --help)` + "\n",
		},
		{
			name:       "missing flag value",
			args:       []string{"in", "-o"},
			wantStatus: 2,
			wantStderr: "ipu-fake: flag needs an argument: -o (run ipu-fake --help)\n",
		},
		{
			name:       "missing required flag",
			args:       []string{"in"},
			wantStatus: 2,
			wantStderr: `ipu-fake: required flag "o" not set (run ipu-fake --help)` + "\n",
		},
		{
			name:       "bad log format",
			args:       []string{"--log-format", "xml", "-o", "x", "in"},
			wantStatus: 2,
			wantStderr: `ipu-fake: --log-format "xml": want text or json (run ipu-fake --help)` + "\n",
		},
		{
			name:       "missing argument",
			args:       []string{"-o", "x"},
			wantStatus: 2,
			wantStderr: "ipu-fake: want one input, got 0 (run ipu-fake --help)\n",
		},
		{
			name:       "failure",
			args:       []string{"-o", "x", "fail"},
			wantStatus: 1,
			wantStderr: "TIME  INFO hello tiles=1472\nipu-fake: read fail: bad header; at byte 0x10\n",
		},
		{
			name:       "silent failure keeps its stdout",
			args:       []string{"-o", "x", "verdict"},
			wantStatus: 1,
			wantStdout: "hardwareTest=FAIL\n",
			wantStderr: "TIME  INFO hello tiles=1472\n",
		},
		{
			name:       "panic",
			args:       []string{"-o", "x", "panic"},
			wantStatus: 1,
			wantStderr: "TIME  INFO hello tiles=1472\nipu-fake: internal error: boom; second line\n",
		},
		{
			name:       "version",
			args:       []string{"--version"},
			wantStdout: "ipu-fake version 0.1.0\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("IPU_DEBUG", tt.env)
			var stdout, stderr bytes.Buffer
			status := Main(newApp(), append([]string{"/usr/bin/ipu-fake"}, tt.args...), &stdout, &stderr)
			gotStderr := logTime.ReplaceAllString(stderr.String(), "TIME")
			gotStderr = jsonTime.ReplaceAllString(gotStderr, "TIME")
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d (stderr %q)", status, tt.wantStatus, stderr.String())
			}
			if diff := cmp.Diff(tt.wantStdout, stdout.String()); diff != "" {
				t.Errorf("stdout mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStderr, gotStderr); diff != "" {
				t.Errorf("stderr mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"in", "--help"}, {"-o", "x", "in", "-h"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := Main(newApp(), append([]string{"ipu-fake"}, args...), &stdout, &stderr)
			if status != 0 || stderr.Len() != 0 {
				t.Errorf("status %d stderr %q, want 0 and nothing", status, stderr.String())
			}
			for _, want := range []string{"USAGE", "--log-format", "--verbose, -v", "--version"} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("help lacks %q:\n%s", want, stdout.String())
				}
			}
		})
	}
}

func TestPanicStackWithDebug(t *testing.T) {
	t.Setenv("IPU_DEBUG", "1")
	var stdout, stderr bytes.Buffer
	status := Main(newApp(), []string{"ipu-fake", "-o", "x", "panic"}, &stdout, &stderr)
	if status != 1 {
		t.Errorf("status %d, want 1", status)
	}
	if !strings.Contains(stderr.String(), "ipu-fake: internal error: boom; second line\n") ||
		!strings.Contains(stderr.String(), "goroutine ") {
		t.Errorf("stderr lacks the message or the stack:\n%s", stderr.String())
	}
}

func TestSubcommands(t *testing.T) {
	app := &cli.App{
		Name: "ipu-multi",
		Commands: []*cli.Command{{
			Name:  "dump",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "raw"}},
			Action: func(c *cli.Context) error {
				return errors.New("dump failed")
			},
		}},
	}
	tests := []struct {
		args       []string
		wantStatus int
		wantStderr string
	}{
		{[]string{"dump", "--nope"}, 2, "ipu-multi: flag provided but not defined: -nope (run ipu-multi --help)\n"},
		{[]string{"dump", "--raw"}, 1, "ipu-multi: dump failed\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := Main(app, append([]string{"ipu-multi"}, tt.args...), &stdout, &stderr)
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d", status, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantStderr, stderr.String()); diff != "" {
				t.Errorf("stderr mismatch (-want +got):\n%s", diff)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %q", stdout.String())
			}
		})
	}
}

func TestFlagsFirst(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "o", Aliases: []string{"output"}},
		&cli.BoolFlag{Name: "v"},
	}
	tests := []struct {
		in, want []string
	}{
		{[]string{"a", "-o", "x", "-v", "b"}, []string{"-o", "x", "-v", "--", "a", "b"}},
		{[]string{"-o", "x"}, []string{"-o", "x"}},
		{[]string{"a", "--output=x"}, []string{"--output=x", "--", "a"}},
		{[]string{"a", "--", "-b", "-o"}, []string{"--", "a", "-b", "-o"}},
		{[]string{"-", "-v"}, []string{"-v", "--", "-"}},
		{[]string{"a", "-o"}, []string{"-o"}},
		{[]string{"a", "-v", "--help"}, []string{"-v", "--help"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.in, " "), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flagsFirst(tt.in, flags)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMemProfile: IPU_MEMPROFILE writes an allocation profile after the
// run; a path that cannot be created is a one-line error and status 1
// before the tool runs.
func TestMemProfile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mem.prof")
	t.Setenv("IPU_MEMPROFILE", good)
	var stdout, stderr bytes.Buffer
	if status := Main(newApp(), []string{"ipu-fake", "in", "-o", "out"}, &stdout, &stderr); status != 0 {
		t.Fatalf("status %d, stderr %q", status, stderr.String())
	}
	if fi, err := os.Stat(good); err != nil || fi.Size() == 0 {
		t.Fatalf("profile %s: %v", good, err)
	}

	bad := filepath.Join(dir, "missing", "mem.prof")
	t.Setenv("IPU_MEMPROFILE", bad)
	stdout.Reset()
	stderr.Reset()
	status := Main(newApp(), []string{"ipu-fake", "in", "-o", "out"}, &stdout, &stderr)
	if status != 1 || stdout.Len() != 0 {
		t.Errorf("status %d, stdout %q: want 1 and the tool not run", status, stdout.String())
	}
	if got := stderr.String(); !strings.HasPrefix(got, "ipu-fake: IPU_MEMPROFILE: open "+bad) || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr %q: want one line naming the path", got)
	}
}

// TestHugePagesEnv: IPU_HUGEPAGES other than 0 or 1 is a one-line error
// and status 1 before the tool runs (IPU_HUGEPAGES=off would otherwise
// leave huge pages on).
func TestHugePagesEnv(t *testing.T) {
	t.Setenv("IPU_HUGEPAGES", "off")
	var stdout, stderr bytes.Buffer
	status := Main(newApp(), []string{"ipu-fake", "in", "-o", "out"}, &stdout, &stderr)
	if status != 1 || stdout.Len() != 0 {
		t.Errorf("status %d, stdout %q: want 1 and the tool not run", status, stdout.String())
	}
	if got, want := stderr.String(), "ipu-fake: IPU_HUGEPAGES \"off\": want 0 (off) or 1 (on, the default)\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}
