package planner

import (
	"ipu.local/libs/graph"
	"ipu.local/libs/lower"
)

func (b *builder) gatherRows(n *graph.Node) error {
	return &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: "indices computed at run time"}
}
