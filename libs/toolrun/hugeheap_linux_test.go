package toolrun

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/urfave/cli/v2"
)

// vmFlags returns the VmFlags of the mapping holding addr
// (/proc/self/smaps).
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-"); ok && !strings.HasSuffix(line, ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return nil
}

func hasFlag(flags []string, f string) bool {
	for _, g := range flags {
		if g == f {
			return true
		}
	}
	return false
}

// TestHugeHeap checks, in a fresh process as a tool starts, that after
// hugeHeap the heap the next allocations take is advised for huge pages
// (a fresh 64 MiB allocation, which no hole of the small heap before it
// can hold), that ExpectHeap advises the heap past the start's range (a
// 192 MiB allocation, which only that range can hold below the heap's
// end), that IPU_HUGEPAGES=0 leaves both alone, and that under an
// address-space limit nothing is advised and nothing fails.
func TestHugeHeap(t *testing.T) {
	if !thpAdvised() {
		t.Skip("transparent huge pages are not in madvise mode on this host")
	}
	if os.Getenv("TOOLRUN_HUGEHEAP_CHILD") == "limited" {
		// Under RLIMIT_AS: no advice, and the large mapping is not tried.
		if hugeHeap() {
			t.Fatal("hugeHeap advised the heap under an address-space limit")
		}
		ExpectHeap(MaxHugeHeapBytes)
		return
	}
	if os.Getenv("TOOLRUN_HUGEHEAP_CHILD") == "1" {
		advised := hugeHeap()
		b := make([]byte, 64<<20)
		// The middle of each: an allocation may start on free pages just
		// below the advised range.
		f := vmFlags(t, uintptr(unsafe.Pointer(&b[len(b)/2])))
		// Past the start's range: advised only by ExpectHeap.
		ExpectHeap(StartHugeHeapBytes + 256<<20)
		c := make([]byte, 192<<20)
		g := vmFlags(t, uintptr(unsafe.Pointer(&c[len(c)/2])))
		runtime.KeepAlive(b)
		runtime.KeepAlive(c)
		switch on := os.Getenv("IPU_HUGEPAGES") != "0"; {
		case on && !advised:
			t.Fatal("hugeHeap did not advise the heap on a host whose transparent huge pages want the advice")
		case on && !hasFlag(f, "hg"):
			t.Fatalf("the heap after hugeHeap is not advised huge: VmFlags %v", f)
		case on && !hasFlag(g, "hg"):
			t.Fatalf("the heap past the start after ExpectHeap is not advised huge: VmFlags %v", g)
		case !on && (advised || hasFlag(f, "hg") || hasFlag(g, "hg")):
			t.Fatalf("IPU_HUGEPAGES=0: hugeHeap reported %v, VmFlags %v and %v", advised, f, g)
		}
		return
	}
	for _, env := range []string{"1", "0"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHugeHeap$", "-test.v")
		cmd.Env = append(os.Environ(), "TOOLRUN_HUGEHEAP_CHILD=1", "IPU_HUGEPAGES="+env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("IPU_HUGEPAGES=%s: %v\n%s", env, err, out)
		}
	}
	if _, err := exec.LookPath("sh"); err != nil {
		return
	}
	cmd := exec.Command("sh", "-c", `ulimit -v 16000000 && exec "$0" -test.run='^TestHugeHeap$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "TOOLRUN_HUGEHEAP_CHILD=limited")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("under RLIMIT_AS: %v\n%s", err, out)
	}
}

// TestInputHeap checks the start's advice a tool sizes from its input
// file: HeapPerInputKey times the size of the first positional argument
// (flags first, after "--"), at least StartHugeHeapBytes, and the start's
// size without the key, a positional argument or a regular file.
func TestInputHeap(t *testing.T) {
	dir := t.TempDir()
	big := dir + "/big.onnx"
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	small := dir + "/small.onnx"
	if err := os.WriteFile(small, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	withKey := &cli.App{Metadata: map[string]any{HeapPerInputKey: int64(50)}}
	for _, c := range []struct {
		name string
		app  *cli.App
		args []string
		want int64
	}{
		{"sized", withKey, []string{"tool", "-o", "x", "--", big}, 500 << 20},
		{"first-positional", withKey, []string{"tool", "--", big, small}, 500 << 20},
		{"small-input", withKey, []string{"tool", "--", small}, StartHugeHeapBytes},
		{"missing", withKey, []string{"tool", "--", dir + "/none"}, StartHugeHeapBytes},
		{"directory", withKey, []string{"tool", "--", dir}, StartHugeHeapBytes},
		{"no-positional", withKey, []string{"tool", "-o", "x"}, StartHugeHeapBytes},
		{"no-key", &cli.App{}, []string{"tool", "--", big}, StartHugeHeapBytes},
	} {
		if got := inputHeap(c.app, c.args); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}

// TestStartHugeHeapSized checks, in a fresh process, that a start sized
// past StartHugeHeapBytes advises the heap past that range with no
// ExpectHeap (a 192 MiB allocation only the sized range can hold).
func TestStartHugeHeapSized(t *testing.T) {
	if !thpAdvised() {
		t.Skip("transparent huge pages are not in madvise mode on this host")
	}
	if os.Getenv("TOOLRUN_HUGEHEAP_CHILD") == "sized" {
		if !startHugeHeap(StartHugeHeapBytes + 256<<20) {
			t.Fatal("the sized start did not advise the heap")
		}
		b := make([]byte, 64<<20)
		c := make([]byte, 192<<20)
		g := vmFlags(t, uintptr(unsafe.Pointer(&c[len(c)/2])))
		runtime.KeepAlive(b)
		runtime.KeepAlive(c)
		if !hasFlag(g, "hg") {
			t.Fatalf("the heap past StartHugeHeapBytes is not advised huge after a sized start: VmFlags %v", g)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartHugeHeapSized$", "-test.v")
	cmd.Env = append(os.Environ(), "TOOLRUN_HUGEHEAP_CHILD=sized", "IPU_HUGEPAGES=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}
