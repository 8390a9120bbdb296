package trace

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock returns the time last set; a test sets it before each call
// that reads the clock (a log line, Phase, End).
type fakeClock struct {
	t   *testing.T
	now time.Time
}

// set takes the seconds part of the seed's timestamps
// (2026-09-13T18:44:SS.ffffffZ).
func (c *fakeClock) set(seconds string) {
	c.t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, "2026-09-13T18:44:"+seconds+"Z")
	if err != nil {
		c.t.Fatal(err)
	}
	c.now = ts
}

func (c *fakeClock) Now() time.Time { return c.now }

// replaySeed emits the events of the seed log through this package: the
// log to log, the verdict lines to out.
func replaySeed(clk *fakeClock, log *slog.Logger, out io.Writer) {
	const dir = "artifacts/mid-cast-order-20260913/"
	phase := func(parent *slog.Logger, name, start, end string, body func(*slog.Logger)) {
		clk.set(start)
		p := Phase(parent, name)
		if body != nil {
			body(p.Logger())
		}
		clk.set(end)
		p.End(nil)
	}
	info := func(log *slog.Logger, at, msg string, args ...any) {
		clk.set(at)
		log.Info(msg, args...)
	}

	build := Span(log, BuildSpan, slog.Int("tile_count", 64), slog.Int("operations", 1))
	phase(build, "compile_runtime", "35.171000", "35.171366", nil)
	phase(build, "plan_package", "35.172000", "35.464190", func(log *slog.Logger) {
		info(log, "35.177133", "loaded mid-plan search state", Bare("path", dir+"qk-early-state.json"), "attempts", 0)
		info(log, "35.187484", "screened exchange table geometry",
			"expansion_ms", 6, "expansion_and_footprint_ms", 7, "estimated_row_bytes", 1424,
			"heuristic_row_bytes", 2660, "geometry_fragments_per_tile", 147, "fragment_limit", 16384)
		info(log, "35.187672", "eliminated unread FP8 cast input padding clears", "removed", 0)
		info(log, "35.195990", "retrying exchange schedule with incremental instruction-alignment validation", "transfers", 524)
		info(log, "35.201537", "finished incremental instruction-alignment validation",
			"transfers", 524, ElapsedMS(5*time.Millisecond+548*time.Microsecond), "success", true)
		phase(log, "plan_kernels", "35.206000", "35.206605", nil)
		phase(log, "compile_kernels", "35.207000", "35.209083", nil)
		phase(log, "link_runtime", "35.209400", "35.209448", nil)
		info(log, "35.211351", "exchange table and repeat patch storage", "exchange_table_bytes", 916,
			"maximum_uncompressed_repeat_patch_bytes", 0, "maximum_elided_arithmetic_patch_bytes", 0)
		phase(log, "size_tile_code", "35.235000", "35.238770", nil)
		info(log, "35.238804", "placing generated tile programs", "linked_end", 321040,
			"host_code_base", 376832, "host_code_bytes", 660, "generated_code_bytes", 1060,
			"exchange_table_bytes", 916, Bare("executable_ranges", "[(377560, 524288)]"))
		info(log, "35.238825", "allocated package support memory", "linked_end", 321040,
			"profile_bytes", 88, "exchange_table_bytes", 916, "host_code_bytes", 660,
			"host_data_bytes", 472, "generated_code_bytes", 1060, "code_address", 377560,
			Bare("available_ranges", "[(327680, 360448), (362680, 376832), (409600, 949168)]"))
		phase(log, "place_storage", "35.239000", "35.240465", nil)
		phase(log, "lower_exchanges", "35.240000", "35.249768", func(log *slog.Logger) {
			for i, at := range []string{"35.241247", "35.241797", "35.242609", "35.242699", "35.248945"} {
				info(log, at, "reused exchange optimization after validating relocated rows", "phase", []int{4, 1, 3, 2, 0}[i])
			}
		})
		phase(log, "optimize_exchange_placement", "35.249768", "35.267928", nil)
		info(log, "35.268004", "costed final placed program", "final_cycles", 19995, "final_exchange", 6561)
		phase(log, "prepare_tile_code", "35.281000", "35.283950", nil)
		phase(log, "emit_tile_code", "35.284000", "35.288011", nil)
		phase(log, "build_tile_images", "35.288011", "35.451803", nil)
		info(log, "35.455429", "validated search incumbent", "cycles", 19995, "resuming", true)
		for _, at := range []string{"35.460195", "35.463777"} {
			info(log, at, "saved mid-plan search state", Bare("path", dir+"qk-early-replayed.json"),
				"attempts", 0, "bytes", 1223828)
		}
	})

	info(log, "35.466287", "writing application package", "tiles", 1472)
	info(log, "35.478450", "application package written")
	info(log, "35.478991", "reading application package")
	info(log, "35.503266", "application package read", "tiles", 1472, Bare("compiler", "0.1.0"))
	info(log, "35.503480", "waiting for hardware ownership", Bare("path", "artifacts/layout-sweep/device.lock"))
	info(log, "35.503487", "acquired hardware ownership", Bare("path", "artifacts/layout-sweep/device.lock"))
	info(log, "35.503492", "opening IPU device", "path", "/dev/ipu0")
	info(log, "35.503515", "IPU device attached", Bare("path", "/dev/ipu0"))
	info(log, "35.503519", "initializing IPU device")
	info(log, "35.511665", "IPU device initialized")
	info(log, "35.511677", "replaying device configuration", "register_writes", 2003)
	info(log, "35.515681", "loading application", "tile_count", 1472, "final_mark", 23)
	info(log, "35.686150", "application loaded and initial synchronization completed", "tile_count", 1472)
	info(log, "35.688262", "prepared reference inputs", ElapsedMS(0))
	info(log, "35.688330", "configured host reference BLAS", "threads", 4)
	Result(out, "referencePrecision", "device")
	info(log, "35.688412", "evaluated host reference", ElapsedMS(0))
	info(log, "35.689372", "starting host exchange session", "startup_mark", 23)
	info(log, "35.689382", "attaching host exchange pages", "pages", 2)
	info(log, "35.690155", "host exchange session started")
	info(log, "35.690188", "invoking host exchange call", "call", "run", "command", 0, "phases", 15)
	Result(out, "profile", dir+"qk-early/model.capnp", "tiles", 1472, "samples", 8021)
	Result(out, "referenceInference", 1, "numericalTest", "PASS")
	info(log, "35.702306", "invoking host exchange call", "call", "run", "command", 0, "phases", 15)
	Result(out, "referenceInference", 2, "numericalTest", "PASS")
	Result(out, "referenceMaximumAbsoluteError", 0.000717, "numericalTest", "PASS")
	Result(out, "package", dir+"qk-early/model.ipuexe", "tiles", 1472, "hardwareTest", "PASS")
}

// TestSeed reproduces the whole seed log byte for byte, stdout and stderr
// interleaved in one stream as in the seed.
func TestSeed(t *testing.T) {
	want, err := os.ReadFile("testdata/seed.log")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(want, []byte("\n")) {
		want = append(want, '\n')
	}
	clk := &fakeClock{t: t}
	var got bytes.Buffer
	log := New(&got, Options{Now: clk.Now})
	replaySeed(clk, log, &got)
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got.String(), "\n")); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestSeedJSON checks that the JSON format carries the same events, one
// valid object per line.
func TestSeedJSON(t *testing.T) {
	clk := &fakeClock{t: t}
	var got bytes.Buffer
	log := New(&got, Options{Format: FormatJSON, Now: clk.Now})
	replaySeed(clk, log, io.Discard)
	lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	if len(lines) != 50 {
		t.Fatalf("got %d lines, want 50", len(lines))
	}
	wantLines := map[int]string{
		0:  `{"time":"2026-09-13T18:44:35.171366Z","level":"INFO","spans":[{"name":"ipu_codegen.package.build","fields":{"tile_count":64,"operations":1}},{"name":"ipu_codegen.package.phase","fields":{"phase":"compile_runtime"}}],"msg":"package build phase finished","phase":"compile_runtime","elapsed_ms":0,"success":true}`,
		11: `{"time":"2026-09-13T18:44:35.238804Z","level":"INFO","spans":[{"name":"ipu_codegen.package.build","fields":{"tile_count":64,"operations":1}},{"name":"ipu_codegen.package.phase","fields":{"phase":"plan_package"}}],"msg":"placing generated tile programs","linked_end":321040,"host_code_base":376832,"host_code_bytes":660,"generated_code_bytes":1060,"exchange_table_bytes":916,"executable_ranges":"[(377560, 524288)]"}`,
		36: `{"time":"2026-09-13T18:44:35.503515Z","level":"INFO","msg":"IPU device attached","path":"/dev/ipu0"}`,
	}
	for i, want := range wantLines {
		if diff := cmp.Diff(want, lines[i]); diff != "" {
			t.Errorf("line %d mismatch (-want +got):\n%s", i, diff)
		}
	}
}
