package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/atomicfile"
	"ipu.local/libs/link"
	"ipu.local/libs/onnx"
	"ipu.local/libs/par"
	"ipu.local/libs/toolrun"
	"ipu.local/libs/trace"
)

// heapPerPlanByte is the link's heap a plan byte, about (the BERT-base
// FP16 layer's 26 MB plan: 355 MB).
const heapPerPlanByte = 14

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-link",
		Usage:     "lower a plan to a linked object",
		ArgsUsage: "IN.plan",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "write the object to `OUT.ipuobj`", Required: true},
			&cli.StringFlag{Name: "model", Usage: "check that the plan was made from `MODEL.onnx` (its fingerprint)"},
			&cli.StringFlag{Name: "state", Usage: "reuse the exchange schedules ipu-plan kept in its search state `S.json` (relocated and validated, not trusted)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return toolrun.Usagef("want exactly one plan IN.plan, got %d arguments", c.NArg())
			}
			return linkPlan(toolrun.Logger(c), c.Args().First(), c.String("o"), c.String("model"), c.String("state"))
		},
	}
	// Fresh pages cost this kind of host more than collections: on a
	// 2-core VM a first touch of anonymous memory costs about 10 us a
	// page. At GOGC=100 against 400, alternating runs: qk-early@1472
	// 0.188-0.191 s against 0.206-0.209 (median of 8), the 12-layer
	// encoder 19.0-19.1 s against 19.7-21.2 (3.9 against 4.1 GB). Under a
	// live heap of 256 MiB, GOGC=200: qk-early's link 78-80 ms against
	// 82-83 (best of 12, twice); the BERT-base layer's alike.
	app.Metadata = map[string]any{toolrun.GCPercentKey: 100, toolrun.SmallHeapGCPercentKey: 200, toolrun.HeapPerInputKey: int64(heapPerPlanByte)}
	return toolrun.Main(app, args, stdout, stderr)
}

// linkPlan reads the plan, lowers it and writes the object.
func linkPlan(log *slog.Logger, in, out, model, state string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("read plan: %w", err)
	}
	if err := artdiff.NotKind(data, "plan"); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	toolrun.ExpectHeap(heapPerPlanByte * int64(len(data)))
	// The plan's own exchange schedules (ipu-plan's validation link made
	// them), unpacked as reading validates them, unless a search state
	// is given.
	fingerprint := par.Background(func() string { return plan.Fingerprint(data) })
	pl, saved, err := plan.ReadWithSchedules(data)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if model != "" {
		md, err := os.ReadFile(model)
		if err != nil {
			return fmt.Errorf("read model: %w", err)
		}
		if fp := onnx.Fingerprint(md); fp != pl.Model.Fingerprint {
			return fmt.Errorf("%s: plan was made from model %q (sha256 %.12s), not from %s (sha256 %.12s)", in, pl.Model.Path, pl.Model.Fingerprint, model, fp)
		}
	}
	// The object is all this link writes: no schedules to save.
	opt := link.Options{Saved: saved, NoSave: true}
	if state != "" {
		sd, err := os.ReadFile(state)
		if err != nil {
			return fmt.Errorf("read search state: %w", err)
		}
		s, err := plan.ReadState(sd)
		if err != nil {
			return fmt.Errorf("%s: %w", state, err)
		}
		if s.Model != pl.Model.Fingerprint || s.Arch != pl.Arch || s.Tiles != pl.Tiles {
			return fmt.Errorf("%s: search state is for model %.12s arch %s tiles %d, the plan for model %.12s arch %s tiles %d", state, s.Model, s.Arch, s.Tiles, pl.Model.Fingerprint, pl.Arch, pl.Tiles)
		}
		opt.Saved = s.Exchanges
	}
	build := trace.Span(log, trace.BuildSpan, slog.Int("tile_count", pl.Tiles), slog.Int("operations", len(pl.Graph.Nodes)))
	opt.Log = build
	o, _, err := link.Link(pl, fingerprint(), opt)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := atomicfile.WriteFile(out, func(w io.Writer) error { return obj.Write(w, o) }); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
