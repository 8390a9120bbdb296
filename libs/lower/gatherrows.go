package lower

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
)

func (l *lowerer) gatherRows(st *plan.Step, n *graph.Node, g *graph.Gather) error {
	return l.notLowered(n, "indices computed at run time")
}
