package link

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/lower"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// directPacks counts, in a lowered program, the pack kernels that write
// straight into a product's operand block (not a staging panel) whose
// panel an exchange also sends from there, and the local copies.
func directPacks(pr *prog.Program) (direct, copies int) {
	sent := map[*prog.Buffer]bool{}
	for _, s := range pr.Steps {
		for _, x := range s.Xfers {
			sent[x.From.Buf] = true
		}
	}
	for _, s := range pr.Steps {
		for _, ks := range s.Work {
			for _, k := range ks {
				if strings.HasSuffix(k.What, ".copy-local") {
					copies++
				}
				if _, ok := k.Params.(*codegen.Pack); !ok {
					continue
				}
				for _, f := range k.Fixes {
					if f.Write && sent[f.Ref.Buf] && !strings.HasSuffix(f.Ref.Buf.Name, ".staged") {
						direct++
					}
				}
			}
		}
	}
	return direct, copies
}

// A packed operand piece that lies in its own tile's block of the
// product's operand, and goes to other tiles too, is packed into that
// block and sent from there: no staging panel, no local copy after the
// exchange. FP16 and FP32 operands, a computed A (Relu, LayerNorm) and
// the committed BERT-small FP16 layer, on few and many tiles; checked
// against the host reference.
func TestPackDirect(t *testing.T) {
	type tc struct {
		name  string
		model []byte
		tiles int
	}
	product := func(dt onnx.DataType, m, k, n int64) []byte {
		b := onnx.NewModel(21)
		b.AddInput("x", dt, []int64{m, k})
		b.AddInput("w", dt, []int64{k, n})
		b.AddNode("Relu", "r_Relu", []string{"x"}, []string{"r"})
		b.AddNode("MatMul", "y_MatMul", []string{"r", "w"}, []string{"y"})
		b.AddOutput("y", dt, []int64{m, n})
		return b.Marshal()
	}
	bert, err := os.ReadFile("../../testdata/models/transformers/bert_small_layer_fp16/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	cases := []tc{
		{"relu fp16 64x192x256", product(onnx.Float16, 64, 192, 256), 64},
		{"relu fp16 40x96x72", product(onnx.Float16, 40, 96, 72), 1472},
		{"relu fp32 36x80x50", product(onnx.Float, 36, 80, 50), 16},
		{"bert small fp16", bert, 1472},
	}
	p, _ := arch.Lookup("ipu21")
	total := 0
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s @%d", c.name, c.tiles), func(t *testing.T) {
			pl, o, st, g, err := planLinkN(t, c.model, c.tiles, 8)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := lower.Lower(pl, g, p)
			if err != nil {
				t.Fatal(err)
			}
			d, cp := directPacks(pr)
			t.Logf("%d packs straight into operand blocks, %d local copies", d, cp)
			total += d
			checkModel(t, o, st, g)
			if st.StagedPacks {
				t.Error("the in-place packs fit, yet Link staged them")
			}
			// Staged (what Link falls back to when the blocks do not
			// fit): no pack into a block, the same numbers.
			staged := *pl
			staged.Packs = plan.StagedPacks
			if pr, err = lower.Lower(&staged, g, p); err != nil {
				t.Fatal(err)
			}
			if d, _ := directPacks(pr); d != 0 {
				t.Errorf("staged packs: %d packs straight into operand blocks", d)
			}
			o, st, err = Link(&staged, "test", Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkModel(t, o, st, g)
		})
	}
	if total == 0 {
		t.Error("no pack wrote straight into an operand block")
	}
}
