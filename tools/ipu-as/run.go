package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/obj"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/asm"
	"ipu.local/libs/atomicfile"
	"ipu.local/libs/toolrun"
)

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-as",
		Usage:     "assemble tile assembly into an object",
		ArgsUsage: "IN.s",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "write the object to `OUT.ipuobj`", Required: true},
			&cli.StringFlag{Name: "arch", Usage: "architecture `PRESET` of a source without .arch", Value: asm.DefaultArch},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return toolrun.Usagef("want exactly one source file IN.s, got %d arguments", c.NArg())
			}
			err := assemble(c.Args().First(), c.String("o"), c.String("arch"))
			var list asm.ErrorList
			if errors.As(err, &list) {
				// One line per problem, not folded into one.
				for _, e := range list {
					fmt.Fprintf(c.App.ErrWriter, "%s: %v\n", c.App.Name, e)
				}
				return cli.Exit("", 1)
			}
			return err
		},
	}
	return toolrun.Main(app, args, stdout, stderr)
}

// assemble reads the source, assembles it and writes the object.
func assemble(in, out, archName string) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("read source: %w", err)
	}
	if err := artdiff.NotKind(src, "assembly source"); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	o, err := asm.Assemble(in, src, asm.Options{Arch: archName, Compiler: toolrun.Version})
	if err != nil {
		return err
	}
	err = atomicfile.WriteFile(out, func(w io.Writer) error { return obj.Write(w, o) })
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
