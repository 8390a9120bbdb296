package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/profile"
	"ipu.local/libs/arch"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/asm"
	"ipu.local/libs/toolrun"
)

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-dump",
		Usage:     "print the canonical text of an object, package or profile",
		ArgsUsage: "FILE",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "memory", Usage: "print only an object's per-tile memory breakdown, the fullest tiles first"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return toolrun.Usagef("want exactly one FILE")
			}
			if c.Bool("memory") {
				return dumpMemory(c.Args().First(), c.App.Writer)
			}
			return dump(c.Args().First(), c.App.Writer)
		},
	}
	return toolrun.Main(app, args, stdout, stderr)
}

func dump(path string, out io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	switch {
	case bytes.HasPrefix(data, []byte(obj.Magic[:len(obj.Magic)-1])):
		o, err := obj.Read(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return dumpObject(w, o)
	case bytes.HasPrefix(data, []byte(ipuexe.Magic[:len(ipuexe.Magic)-1])):
		p, err := ipuexe.Read(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return ipuexe.Dump(w, p, ipuexe.DumpOptions{Disasm: disasm})
	case artdiff.Detect(data) != nil: // objects and packages are matched above: a plan
		return fmt.Errorf("%s: a plan, not an object, package or profile (a plan is JSON to read as it is; ipu-diff compares two)", path)
	default:
		p, err := profile.Read(data)
		if err != nil {
			return fmt.Errorf("%s: not an object, package or profile: %w", path, err)
		}
		return profile.Dump(w, p)
	}
}

// dumpObject writes an object with its memory report against the usable
// tile memory of its architecture preset; an object for an unknown
// architecture is dumped with a line saying there is no report.
func dumpObject(w io.Writer, o *obj.Object) error {
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		if err := obj.Dump(w, o, obj.DumpOptions{Disasm: disasm}); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "\nmemory: no report: unknown architecture %q\n", o.Arch)
		return err
	}
	return obj.Dump(w, o, obj.DumpOptions{Disasm: disasm, UsableMemory: int64(p.UsableMemory().Size())})
}

// dumpMemory writes an object's per-tile memory breakdown against the
// usable tile memory of its architecture.
func dumpMemory(path string, out io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(data, []byte(obj.Magic[:len(obj.Magic)-1])) {
		return fmt.Errorf("%s: --memory: not an object", path)
	}
	o, err := obj.Read(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		return fmt.Errorf("%s: field arch: %w", path, err)
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	obj.DumpMemoryByTile(w, o, int64(p.UsableMemory().Size()))
	return nil
}

func disasm(w io.Writer, addr uint32, code []byte) {
	asm.Disassemble(w, addr, code)
}
