package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/atomicfile"
	"ipu.local/libs/pack"
	"ipu.local/libs/par"
	"ipu.local/libs/toolrun"
	"ipu.local/libs/trace"
)

// heapPerObjectByte is the packer's heap an object byte, about (the
// BERT-base FP16 layer's 43 MB object: 220 MB).
const heapPerObjectByte = 5

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-pack",
		Usage:     "pack a linked object into an application package",
		ArgsUsage: "IN.ipuobj",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "write the package to `OUT.ipuexe`", Required: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return toolrun.Usagef("want exactly one object IN.ipuobj, got %d arguments", c.NArg())
			}
			return packObject(toolrun.Logger(c), c.Args().First(), c.String("o"))
		},
	}
	app.Metadata = map[string]any{toolrun.HeapPerInputKey: int64(heapPerObjectByte)}
	return toolrun.Main(app, args, stdout, stderr)
}

// packObject reads the object, builds the tile images and writes the
// package.
func packObject(log *slog.Logger, in, out string) error {
	o, fingerprint, err := readObject(in)
	if err != nil {
		return err
	}
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}

	build := trace.Span(log, trace.BuildSpan, slog.Int("tile_count", len(o.Tiles)), slog.Int("operations", 0))
	phase := trace.Phase(build, "build_tile_images")
	pkg, err := pack.Build(o, p)
	if err := phase.End(err); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	pkg.Object = fingerprint

	log.Info("writing application package", "tiles", pkg.Tiles)
	err = atomicfile.WriteFile(out, func(w io.Writer) error { return ipuexe.Write(w, pkg) })
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	log.Info("application package written")
	return nil
}

// readObject reads and decodes the object file and returns it with the
// fingerprint of its bytes.
func readObject(path string) (*obj.Object, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read object: %w", err)
	}
	if err := artdiff.NotKind(data, "object"); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	toolrun.ExpectHeap(heapPerObjectByte * int64(len(data)))
	fingerprint := par.Background(func() string { return obj.Fingerprint(data) })
	o, err := obj.Read(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return o, fingerprint(), nil
}
