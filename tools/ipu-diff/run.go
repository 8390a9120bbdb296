package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"ipu.local/libs/artdiff"
	"ipu.local/libs/toolrun"
)

// Exit statuses beyond success, as diff(1) has them.
const (
	exitDifferent = 1
	exitTrouble   = 2
)

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-diff",
		Usage:     "show how two objects or two packages differ",
		ArgsUsage: "A B",
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return toolrun.Usagef("want two artifacts A B, got %d arguments", c.NArg())
			}
			differ, err := diff(c, c.Args().Get(0), c.Args().Get(1))
			switch {
			case err != nil:
				// An unreadable or undecodable file is not "different".
				return cli.Exit(err.Error(), exitTrouble)
			case differ:
				return cli.Exit("", exitDifferent)
			}
			return nil
		},
	}
	return toolrun.Main(app, args, stdout, stderr)
}

// diff compares the two files and prints their differences.
func diff(c *cli.Context, pathA, pathB string) (differ bool, err error) {
	log := toolrun.Logger(c)
	a, err := readFile(pathA)
	if err != nil {
		return false, err
	}
	b, err := readFile(pathB)
	if err != nil {
		return false, err
	}
	r, err := artdiff.Compare(a, b)
	if err != nil {
		return false, err
	}
	log.Debug("compared artifacts", "kind", r.Kind.Name, "differences", len(r.Lines))
	w := bufio.NewWriter(c.App.Writer)
	for _, l := range r.Lines {
		fmt.Fprintln(w, l)
	}
	if err := w.Flush(); err != nil {
		return false, fmt.Errorf("write differences: %w", err)
	}
	return !r.Equal(), nil
}

func readFile(path string) (artdiff.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return artdiff.File{}, err
	}
	return artdiff.File{Name: path, Data: data}, nil
}
