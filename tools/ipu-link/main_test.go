package main

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	"ipu.local/formats/obj"
	"ipu.local/libs/hostref"
	"ipu.local/libs/link"
	"ipu.local/libs/sim"
	"ipu.local/libs/verdict"
	"os"
	"sort"
	"strconv"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-link": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"mkplan":   func() { os.Exit(mkplan(os.Args[1:])) },
		"mktranspose": func() {
			// mktranspose OUT: y = Transpose(Relu(x)), x [16, 32]: the
			// transpose's output may take any mapping (its step moves
			// elements between tiles as the two mappings need).
			b := onnx.NewModel(17)
			b.AddInput("x", onnx.Float, []int64{16, 32})
			b.AddNode("Relu", "relu", []string{"x"}, []string{"r"})
			b.AddNode("Transpose", "transpose", []string{"r"}, []string{"y"}, onnx.IntsAttr("perm", 1, 0))
			b.AddOutput("y", onnx.Float, []int64{32, 16})
			if err := os.WriteFile(os.Args[1], b.Marshal(), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		},
		"edittensor":    func() { os.Exit(edittensor(os.Args[1:])) },
		"withschedules": func() { os.Exit(withschedules(os.Args[1:])) },
		"sameobj":       func() { os.Exit(sameobj(os.Args[1:])) },
		"simcheck":      func() { os.Exit(simcheck(os.Args[1:])) },
	})
}

// mkplan MODEL OUT TILES [STATE] plans MODEL over TILES tiles of ipu21
// (seed 1, 4 attempts), as ipu-plan would, and writes the plan; with
// STATE also the search state with the exchange schedules of linking the
// plan, as ipu-plan --state keeps them.
func mkplan(args []string) int {
	if len(args) != 3 && len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: mkplan MODEL OUT TILES [STATE]")
		return 2
	}
	tiles, err := strconv.Atoi(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = func() error {
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		m, err := onnx.ReadModel(data)
		if err != nil {
			return err
		}
		g, err := graph.Build(m)
		if err != nil {
			return err
		}
		p, err := arch.Lookup("ipu21")
		if err != nil {
			return err
		}
		pl, state, _, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1, MaxAttempts: 4,
			ModelPath: filepath.Base(args[0]), ModelFingerprint: onnx.Fingerprint(data)})
		if err != nil {
			return err
		}
		out, err := plan.Marshal(pl)
		if err != nil {
			return err
		}
		if len(args) == 4 {
			_, st, err := link.Link(pl, plan.Fingerprint(out), link.Options{})
			if err != nil {
				return err
			}
			state.Exchanges = st.Saved
			sd, err := plan.MarshalState(state)
			if err != nil {
				return err
			}
			if err := os.WriteFile(args[3], sd, 0o644); err != nil {
				return err
			}
		}
		return os.WriteFile(args[1], out, 0o644)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkplan:", err)
		return 1
	}
	return 0
}

// withschedules IN OUT [bad] links the plan IN and writes it to OUT with
// the link's exchange schedules packed in it, as ipu-plan writes them
// (bad: a damaged pack instead).
func withschedules(args []string) int {
	if len(args) != 2 && len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: withschedules IN OUT [bad]")
		return 2
	}
	err := func() error {
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		pl, err := plan.Read(data)
		if err != nil {
			return err
		}
		_, st, err := link.Link(pl, plan.Fingerprint(data), link.Options{})
		if err != nil {
			return err
		}
		if len(st.Saved) == 0 {
			return fmt.Errorf("the link saved no schedules")
		}
		pl.Schedules = plan.PackSchedules(st.Saved)
		if len(args) == 3 {
			pl.Schedules = []byte{5, 1, 2, 3, 4, 5}
		}
		out, err := plan.Marshal(pl)
		if err != nil {
			return err
		}
		return os.WriteFile(args[1], out, 0o644)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "withschedules:", err)
		return 1
	}
	return 0
}

// sameobj A B compares two objects but for the fingerprint of what they
// were made from.
func sameobj(args []string) int {
	var os2 [2]*obj.Object
	for i, f := range args {
		data, err := os.ReadFile(f)
		if err == nil {
			os2[i], err = obj.Read(data)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sameobj:", err)
			return 1
		}
		os2[i].Source = ""
	}
	if diff := cmp.Diff(os2[0], os2[1]); diff != "" {
		fmt.Fprintf(os.Stderr, "sameobj: mismatch (-%s +%s):\n%s", args[0], args[1], diff)
		return 1
	}
	return 0
}

// edittensor PLAN NAME OUT moves every piece of the plan's tensor NAME
// (the last one of that value) from tile t to tile tiles-1-t, keeping the
// pieces sorted, and writes the edited plan: a plan edited by hand.
func edittensor(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: edittensor PLAN NAME OUT")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err == nil {
		var pl *plan.Plan
		if pl, err = plan.Read(data); err == nil {
			k := -1
			for i, t := range pl.Tensors {
				if t.Name == args[1] {
					k = i
				}
			}
			if k < 0 {
				fmt.Fprintf(os.Stderr, "edittensor: no tensor %q\n", args[1])
				return 1
			}
			t := &pl.Tensors[k]
			for i := range t.Pieces {
				t.Pieces[i].Tile = pl.Tiles - 1 - t.Pieces[i].Tile
			}
			sort.Slice(t.Pieces, func(i, j int) bool { return plan.PieceLess(t.Pieces[i], t.Pieces[j]) })
			var out []byte
			if out, err = plan.Marshal(pl); err == nil {
				err = os.WriteFile(args[2], out, 0o644)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edittensor:", err)
		return 1
	}
	return 0
}

// simcheck OBJ... runs each object on the simulator with the same
// generated inputs and checks every output against the host reference of
// the model the object carries (verdict.Compare): objects from plans that
// lay tensors out differently compute the same results.
func simcheck(args []string) int {
	for _, path := range args {
		err := func() error {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			o, err := obj.Read(data)
			if err != nil {
				return err
			}
			pg, err := plan.ReadGraph(o.Host.Model)
			if err != nil {
				return err
			}
			g, err := graph.Decode(pg)
			if err != nil {
				return err
			}
			ins := hostref.GenerateInputs(g, 1)
			raw := make([][]byte, len(ins))
			for i, in := range ins {
				raw[i] = in.Raw
			}
			outs, _, err := link.Simulate(o, raw, sim.Options{})
			if err != nil {
				return err
			}
			want, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.Device, Threads: 1})
			if err != nil {
				return err
			}
			for i, w := range want {
				ot := o.Host.Outputs[i]
				r, err := verdict.Compare(ot.Name, ot.DType, ot.Accumulate, outs[i], w.Raw)
				if err != nil {
					return err
				}
				if !r.Pass {
					return fmt.Errorf("output %q: %d of %d elements wrong", ot.Name, r.Bad, r.Elements)
				}
			}
			return nil
		}()
		if err != nil {
			fmt.Fprintf(os.Stderr, "simcheck: %s: %v\n", path, err)
			return 1
		}
	}
	return 0
}

// TestScript runs testdata/script/*.txtar with ROOT set to the
// repository root; ipu-plan is built from ../ipu-plan into $WORK/bin.
func TestScript(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ROOT", root)
			return nil
		},
	})
}
