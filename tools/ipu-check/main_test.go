package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/profile"
	"ipu.local/libs/arch"
	"ipu.local/libs/asm"
	"ipu.local/libs/device"
	"ipu.local/libs/isa"
	"ipu.local/libs/onnx"
	"ipu.local/libs/pack"
	"ipu.local/libs/sim"
	"ipu.local/libs/trace"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-check": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"mkpkg":     func() { os.Exit(mkpkgMain(os.Args[1:])) },
		"mkdev":     func() { os.Exit(mkdevMain(os.Args[1:])) },
		"loaddev":   func() { os.Exit(loaddevMain(os.Args[1:])) },
		"mktensor":  func() { os.Exit(mktensorMain(os.Args[1:])) },
		"profdump":  func() { os.Exit(profdumpMain(os.Args[1:])) },
		"mkasm":     func() { os.Exit(mkasmMain(os.Args[1:])) },
	})
}

// TestScript runs testdata/script/*.txtar. Besides the programs of
// TestMain the scripts have
//
//	cmpstderr FILE   the last command's stderr, timestamps stripped and
//	                 elapsed_ms values replaced by N, equals FILE
//
// and $PROFILE_SCHEMA, the path of formats/profile/profile.capnp, and
// $SRC, the assembly programs of testdata/asm (mkasm SRC OUT builds one).
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			schema, err := filepath.Abs(filepath.Join("..", "..", "formats", "profile", "profile.capnp"))
			if err != nil {
				return err
			}
			env.Setenv("PROFILE_SCHEMA", schema)
			src, err := filepath.Abs(filepath.Join("testdata", "asm"))
			env.Setenv("SRC", src)
			return err
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cmpstderr": cmpStderr,
		},
	})
}

// Where the test program keeps its buffer in tile memory.
const bufAddr = 0x90000

// addOneProgram is the supervisor code of tile 0: each call it reads the
// four floats x from host page 0, adds 1.0 to each with f32add, and writes
// them to host page 1. With fault set, it first loads from address 0,
// which is outside tile memory.
//
//	loop:	hsync $m0
//		(fault: ldm $m4, [$m15+0])
//		li $m1, bufAddr; li $m2, 0; li $m3, 16
//		hin $m1, $m2, $m3
//		ali $a4, 0; alih $a4, 0x3f80              $a4 = 1.0
//		(i = 0..3) ld32 $a0, [$m1+4i]; f32add $a0, $a0, $a4; st32 $a0, [$m1+4i]
//		li $m6, 0; lih $m6, 0x100                 host page 1, offset 0
//		hout $m6, $m1, $m3
//		br loop
func addOneProgram(fault bool) []byte {
	var code []isa.Inst
	emit := func(i isa.Inst) { code = append(code, i) }
	emit(isa.Inst{Op: isa.HSYNC, D: 0})
	if fault {
		emit(isa.Inst{Op: isa.LDM, D: 4, A: 15})
	}
	emit(isa.Inst{Op: isa.LI, D: 1, Imm: bufAddr})
	emit(isa.Inst{Op: isa.LI, D: 2, Imm: 0})
	emit(isa.Inst{Op: isa.LI, D: 3, Imm: 16})
	emit(isa.Inst{Op: isa.HIN, D: 1, A: 2, B: 3})
	emit(isa.Inst{Op: isa.ALI, D: 4, Imm: 0})
	emit(isa.Inst{Op: isa.ALIH, D: 4, Imm: 0x3f80})
	for i := int32(0); i < 4; i++ {
		emit(isa.Inst{Op: isa.LD32, D: 0, A: 1, Imm: 4 * i})
		emit(isa.Inst{Op: isa.FADD, D: 0, A: 0, B: 4})
		emit(isa.Inst{Op: isa.ST32, D: 0, A: 1, Imm: 4 * i})
	}
	emit(isa.Inst{Op: isa.LI, D: 6, Imm: 0})
	emit(isa.Inst{Op: isa.LIH, D: 6, Imm: 0x100})
	emit(isa.Inst{Op: isa.HOUT, D: 6, A: 1, B: 3})
	emit(isa.Inst{Op: isa.BR, Imm: -int32(len(code) + 1)})
	out := make([]byte, 4*len(code))
	for i, in := range code {
		isa.PutWord(out[4*i:], isa.MustEncode(in))
	}
	return out
}

// addOnePackage is an ipu21-tiny package whose tile 0 runs addOneProgram:
// input "x" float [4] in page 0, output "y" float [4] in page 1, y's
// Accumulate as given.
func addOnePackage(fault bool, accumulate int64) *ipuexe.Package {
	const archName = "ipu21-tiny"
	p := arch.MustLookup(archName)
	code := addOneProgram(fault)
	sum := sha256.Sum256([]byte("ipu-check test"))
	pkg := &ipuexe.Package{
		Arch:     archName,
		Compiler: "0.1.0",
		Tiles:    p.Tiles,
		Object:   hex.EncodeToString(sum[:]),
		Images: []ipuexe.Image{
			{
				Entry: p.Executable.Lo,
				Segments: []obj.Segment{
					{Name: "text", Kind: obj.Code, Addr: p.Executable.Lo, Size: uint32(len(code)), Data: code},
					{Name: "buf", Kind: obj.BSS, Addr: bufAddr, Size: 16},
				},
				Symbols: []obj.Symbol{{Name: "main", Addr: p.Executable.Lo, Size: uint32(len(code)), Code: true}},
			},
			{Idle: true},
		},
		TileImage: make([]uint32, p.Tiles),
		Config:    []obj.RegWrite{{Tile: obj.AllTiles, Reg: sim.RegWatchdog, Value: 1 << 20}},
		Host: obj.HostProgram{
			Phases:  []obj.Phase{{Kind: obj.HostExchange, Name: "add_one"}},
			Pages:   []obj.Page{{ID: 0, Bytes: 16}, {ID: 1, Bytes: 16}},
			Inputs:  []obj.Tensor{{Name: "x", DType: "float", Shape: []int64{4}, Page: 0}},
			Outputs: []obj.Tensor{{Name: "y", DType: "float", Shape: []int64{4}, Page: 1, Accumulate: accumulate}},
		},
	}
	for t := 1; t < p.Tiles; t++ {
		pkg.TileImage[t] = 1
	}
	img := &pkg.Images[0]
	pkg.Config = append(pkg.Config, pack.TileConfig(0, img.Entry, img.Segments, false)...)
	return pkg
}

// mkpkg OUT [fault] [accumulate=N] [model=KIND] writes the add-one
// package, with the model section testModel(KIND).
func mkpkgMain(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: mkpkg OUT [fault] [accumulate=N] [model=KIND]")
		return 2
	}
	fault, accumulate, model := false, int64(0), ""
	for _, a := range args[1:] {
		switch {
		case a == "fault":
			fault = true
		case strings.HasPrefix(a, "accumulate="):
			n, err := strconv.ParseInt(strings.TrimPrefix(a, "accumulate="), 10, 64)
			if err != nil {
				fmt.Fprintln(os.Stderr, "mkpkg:", err)
				return 2
			}
			accumulate = n
		case strings.HasPrefix(a, "model="):
			model = strings.TrimPrefix(a, "model=")
		default:
			fmt.Fprintln(os.Stderr, "mkpkg: unknown option", a)
			return 2
		}
	}
	pkg := addOnePackage(fault, accumulate)
	var err error
	if model != "" {
		pkg.Host.Model, err = testModel(model)
	}
	var data []byte
	if err == nil {
		data, err = ipuexe.Marshal(pkg)
	}
	if err == nil {
		err = os.WriteFile(args[0], data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		return 1
	}
	return 0
}

// mkdev DEV ARCH creates a fresh, powered-off device.
func mkdevMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkdev DEV ARCH")
		return 2
	}
	d, err := device.Attach(args[0], args[1], trace.New(&bytes.Buffer{}, trace.Options{}))
	if err == nil {
		err = d.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdev:", err)
		return 1
	}
	return 0
}

// loaddev DEV PKG loads the package onto the device, as ipu-load does.
func loaddevMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: loaddev DEV PKG")
		return 2
	}
	err := func() error {
		data, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		pkg, err := ipuexe.Read(data)
		if err != nil {
			return err
		}
		log := trace.New(&bytes.Buffer{}, trace.Options{})
		d, err := device.Attach(args[0], pkg.Arch, log)
		if err != nil {
			return err
		}
		defer d.Close()
		if err := d.Load(pkg, ipuexe.Fingerprint(data), log, device.LoadOptions{}); err != nil {
			return err
		}
		return d.Close()
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loaddev:", err)
		return 1
	}
	return 0
}

// mktensor FILE DTYPE DIMS V... writes a TensorProto (creating FILE's
// directory): DTYPE float or
// int32, DIMS comma-separated ("-" for a scalar), the values in decimal
// (float: also hex bits as 0x7fc00000).
func mktensorMain(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: mktensor FILE DTYPE DIMS V...")
		return 2
	}
	err := func() error {
		t := &onnx.Tensor{Dims: []int64{}}
		if args[2] != "-" {
			for _, f := range strings.Split(args[2], ",") {
				n, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					return err
				}
				t.Dims = append(t.Dims, n)
			}
		}
		for _, v := range args[3:] {
			var bits uint32
			switch args[1] {
			case "float":
				t.DType = onnx.Float
				if strings.HasPrefix(v, "0x") {
					n, err := strconv.ParseUint(v[2:], 16, 32)
					if err != nil {
						return err
					}
					bits = uint32(n)
				} else {
					f, err := strconv.ParseFloat(v, 32)
					if err != nil {
						return err
					}
					bits = math.Float32bits(float32(f))
				}
			case "int32":
				t.DType = onnx.Int32
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					return err
				}
				bits = uint32(n)
			default:
				return fmt.Errorf("dtype %q: want float or int32", args[1])
			}
			t.Raw = binary.LittleEndian.AppendUint32(t.Raw, bits)
		}
		if err := os.MkdirAll(filepath.Dir(args[0]), 0o755); err != nil {
			return err
		}
		return os.WriteFile(args[0], onnx.EncodeTensor(t), 0o644)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mktensor:", err)
		return 1
	}
	return 0
}

// profdump FILE reads a profile and prints its dump.
func profdumpMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: profdump FILE")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "profdump:", err)
		return 1
	}
	p, err := profile.Read(data)
	if err == nil {
		err = profile.Dump(os.Stdout, p)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profdump:", err)
		return 1
	}
	return 0
}

var (
	timestamp = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z +`)
	elapsed   = regexp.MustCompile(`elapsed_ms=\d+`)
)

// normalize strips what varies between runs from a log.
func normalize(s string) string {
	return elapsed.ReplaceAllString(timestamp.ReplaceAllString(s, ""), "elapsed_ms=N")
}

func cmpStderr(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: cmpstderr FILE")
	}
	got := normalize(ts.ReadFile("stderr"))
	want := ts.ReadFile(args[0])
	if diff := cmp.Diff(want, got); diff != "" {
		ts.Fatalf("stderr mismatch (-want +got):\n%s", diff)
	}
}

// TestExitStatus checks the statuses of the pipeline contract, which
// scripts cannot see.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "app.ipuexe")
	faulty := filepath.Join(dir, "fault.ipuexe")
	dev := filepath.Join(dir, "ipu0")
	faultDev := filepath.Join(dir, "ipu1")
	data := filepath.Join(dir, "data")
	bad := filepath.Join(dir, "bad")
	for _, cmd := range [][]string{
		{"mkpkg", pkg},
		{"mkpkg", faulty, "fault"},
		{"loaddev", dev, pkg},
		{"loaddev", faultDev, faulty},
		{"mktensor", filepath.Join(data, "input_0.pb"), "float", "4", "1", "2", "3", "4"},
		{"mktensor", filepath.Join(data, "output_0.pb"), "float", "4", "2", "3", "4", "5"},
		{"mktensor", filepath.Join(bad, "input_0.pb"), "float", "4", "1", "2", "3", "4"},
		{"mktensor", filepath.Join(bad, "output_0.pb"), "float", "4", "2", "3", "4", "6"},
	} {
		if err := os.MkdirAll(filepath.Dir(cmd[1]), 0o755); err != nil {
			t.Fatal(err)
		}
		var status int
		switch cmd[0] {
		case "mkpkg":
			status = mkpkgMain(cmd[1:])
		case "loaddev":
			status = loaddevMain(cmd[1:])
		case "mktensor":
			status = mktensorMain(cmd[1:])
		}
		if status != 0 {
			t.Fatalf("%v failed", cmd)
		}
	}

	tests := []struct {
		name   string
		args   []string
		status int
		stdout string // last line
		stderr string // last line, without time and level
	}{
		{"pass", []string{"--device", dev, "--data", data, pkg}, 0,
			"package=" + pkg + " tiles=4 hardwareTest=PASS",
			`invoking host exchange call call="run" command=0 phases=1`},
		{"numerical fail", []string{"--device", dev, "--data", bad, "--inferences", "1", pkg}, 1,
			"package=" + pkg + " tiles=4 hardwareTest=PASS",
			`numerical mismatch inference=1 output="y" index=3 got=5 (0x40a00000) want=6 (0x40c00000) bad=1 elements=4 max_abs_error=1 atol=0`},
		{"device fault", []string{"--device", faultDev, "--data", data, faulty}, 1,
			"package=" + faulty + " tiles=4 hardwareTest=FAIL", ""},
		{"no data, no model", []string{"--device", dev, pkg}, 2, "",
			"ipu-check: package carries no model (an assembly program): give --data DIR (run ipu-check --help)"},
		{"no device flag", []string{"--data", data, pkg}, 2, "",
			`ipu-check: required flag "device" not set (run ipu-check --help)`},
		{"bad precision", []string{"--device", dev, "--data", data, "--reference-precision", "fp16", pkg}, 2, "",
			`ipu-check: --reference-precision "fp16": want device, fp32 or fp64 (run ipu-check --help)`},
		{"bad inferences", []string{"--device", dev, "--data", data, "--inferences", "0", pkg}, 2, "",
			"ipu-check: --inferences 0: want 1 to 1048576 (run ipu-check --help)"},
		{"bad threads", []string{"--device", dev, "--data", data, "--threads", "-1", pkg}, 2, "",
			"ipu-check: --threads -1: must not be negative (run ipu-check --help)"},
		{"two packages", []string{"--device", dev, pkg, pkg}, 2, "",
			"ipu-check: want exactly one package IN.ipuexe, got 2 arguments (run ipu-check --help)"},
		{"no device", []string{"--device", filepath.Join(dir, "none"), "--data", data, pkg}, 1, "",
			"ipu-check: device " + filepath.Join(dir, "none") + " does not exist: run ipu-load first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(append([]string{"ipu-check"}, tt.args...), &stdout, &stderr)
			lastOut := lastLine(stdout.String())
			lastErr := strings.TrimPrefix(strings.TrimLeft(lastLine(normalize(stderr.String())), " "), "INFO ")
			lastErr = strings.TrimPrefix(lastErr, "ERROR ")
			if status != tt.status || lastOut != tt.stdout || (tt.stderr != "" && lastErr != tt.stderr) {
				t.Errorf("status %d, last stdout line %q, last stderr line %q;\nwant %d, %q, %q\nstderr:\n%s",
					status, lastOut, lastErr, tt.status, tt.stdout, tt.stderr, stderr.String())
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// mkasm SRC.s OUT.ipuexe [model=KIND] assembles a tile program and packs
// it, as ipu-as and ipu-pack do, with the model section testModel(KIND).
func mkasmMain(args []string) int {
	model := ""
	if len(args) == 3 && strings.HasPrefix(args[2], "model=") {
		model, args = strings.TrimPrefix(args[2], "model="), args[:2]
	}
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkasm SRC.s OUT.ipuexe [model=KIND]")
		return 2
	}
	err := func() error {
		src, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		o, err := asm.Assemble(filepath.Base(args[0]), src, asm.Options{})
		if err != nil {
			return err
		}
		p, err := arch.Lookup(o.Arch)
		if err != nil {
			return err
		}
		pkg, err := pack.Build(o, p)
		if err != nil {
			return err
		}
		ob, err := obj.Marshal(o)
		if err != nil {
			return err
		}
		pkg.Object = obj.Fingerprint(ob)
		if model != "" {
			if pkg.Host.Model, err = testModel(model); err != nil {
				return err
			}
		}
		data, err := ipuexe.Marshal(pkg)
		if err != nil {
			return err
		}
		return os.WriteFile(args[1], data, 0o644)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkasm:", err)
		return 1
	}
	return 0
}
