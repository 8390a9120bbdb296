package toolrun

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"ipu.local/libs/atomicfile"
)

// signalChildEnv names the directory the child tool of TestStopOnSignal
// writes into; set, the test binary is that child.
const signalChildEnv = "TOOLRUN_SIGNAL_CHILD_DIR"

// TestStopOnSignal runs a tool (this test binary, as the child) that has
// published one output and is half-way through two others, a file and a
// directory, then stops it with each of the stop signals: the child
// removes the two unfinished outputs, says so in one line and dies by the
// signal; the published output stays.
func TestStopOnSignal(t *testing.T) {
	if dir := os.Getenv(signalChildEnv); dir != "" {
		signalChild(dir) // does not return
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			if signal.Ignored(sig) {
				// Inherited (a background job's interrupt, nohup): the
				// child inherits it too and rightly goes on.
				t.Skipf("%v is ignored in this process", sig)
			}
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestStopOnSignal$")
			cmd.Env = append(os.Environ(), signalChildEnv+"="+dir)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ready := filepath.Join(dir, "ready")
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the child did not get ready; stderr:\n%s", stderr.String())
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("child ended with %v, want death by %v", cmd.ProcessState, sig)
			}
			want := regexp.MustCompile(`^child: stopped by signal: ` + regexp.QuoteMeta(sig.String()) +
				` \(removed 2 unfinished outputs: ` + regexp.QuoteMeta(dir) + `/\.out\.tmp[0-9a-z]+, \.\.\.\)\n$`)
			if !want.MatchString(stderr.String()) {
				t.Errorf("stderr:\n%s\nwant one line matching %s", stderr.String(), want)
			}
			if diff := cmp.Diff([]string{"kept", "ready"}, dirNames(t, dir)); diff != "" {
				t.Errorf("left in the directory (-want +got):\n%s", diff)
			}
		})
	}
}

// signalChild is the tool TestStopOnSignal stops: it publishes dir/kept,
// creates an unfinished report directory and writes dir/out, which it
// never finishes: past its first megabyte it makes dir/ready and waits.
func signalChild(dir string) {
	app := &cli.App{Name: "child", Action: func(*cli.Context) error {
		if err := atomicfile.Write(filepath.Join(dir, "kept"), []byte("done\n")); err != nil {
			return err
		}
		if _, err := atomicfile.Create(func() (string, error) { return os.MkdirTemp(dir, ".report.tmp-") }); err != nil {
			return err
		}
		return atomicfile.WriteFile(filepath.Join(dir, "out"), func(w io.Writer) error {
			if _, err := w.Write(make([]byte, 1<<20)); err != nil { // past the buffer: on disk
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
				return err
			}
			time.Sleep(time.Minute)
			return nil
		})
	}}
	os.Exit(Main(app, []string{"child"}, io.Discard, os.Stderr))
}

// dirNames lists the names in dir, in order.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
