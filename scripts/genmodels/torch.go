package main

// The -torch cases: the idioms of torch.onnx.export (the shared torch_*
// cases' idioms) at other sizes, batches, opsets and orders. See the
// package doc for the families.

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"ipu.local/libs/atomicfile"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// torchFamily is the kind of model a torch case is.
type torchFamily int

const (
	// torchMLP: Flatten -> (Gemm(transB=1) -> LayerNorm -> Relu)* ->
	// Gemm -> Softmax, LogSoftmax or Sigmoid.
	torchMLP torchFamily = iota
	// torchGate: a torchMLP detector with one sigmoid score deciding
	// through If whether a second network runs.
	torchGate
	// torchEmbed: token and position embeddings, LayerNorm.
	torchEmbed
	// torchAttn: one post-norm encoder layer with 4-D multi-head
	// attention and an additive padding mask.
	torchAttn
	// torchEmbedAttn: torchEmbed then torchAttn.
	torchEmbedAttn
	// torchLlama: a LLaMA-style decoder layer (llama.go) over
	// hidden_states with int64 position_ids.
	torchLlama
	// torchT5: a T5 encoder layer (t5.go) with its relative position
	// bias.
	torchT5
	// torchViT: a ViT's embeddings (the patch Conv) and one layer
	// (vit.go) over pixel_values.
	torchViT
	// torchCNN: a small ResNet (cnn.go): Conv, BatchNormalization,
	// MaxPool, a residual block, GlobalAveragePool, Gemm.
	torchCNN
	// torchUNet: a small UNet (unet.go): Conv, MaxPool, Resize up by
	// 2, the skip concatenated.
	torchUNet
)

// Position id idioms of torchEmbed.
const (
	posInit   = iota // an int64 initializer [S]
	posConst         // a Constant node int64 [1, S]
	posRange         // Range(0, S, 1) then Unsqueeze(axes=[0])
	posSlice         // Slice of a position_ids buffer [1, P] (Hugging Face's way)
	posCumsum        // from input_ids, padding_idx 1 (RoBERTa's create_position_ids_from_input_ids)
)

// torchCase is one generated case.
type torchCase struct {
	Name   string
	Family torchFamily
	Opset  int64
	DType  onnx.DataType // float or float16: every float tensor
	Batch  int64

	// torchMLP, torchGate: the input's shape after the batch (flattened
	// by Flatten), the hidden widths, the classes and the head. torchCNN:
	// Widths are a ResNet-18's stage widths (cnn.go).
	In      []int64
	Widths  []int64
	Classes int64
	Head    string // "softmax", "logsoftmax" or "sigmoid"

	// torchEmbed, torchAttn, torchEmbedAttn.
	Seq, Hidden, Heads, FFN, Vocab int64
	Pos                            int

	// Idiom variations.
	NativeLN   bool  // LayerNormalization (torch's export at opset 17)
	KeepDims0  bool  // ReduceMean keepdims=0 then Unsqueeze(axes=[-1]): no fusion
	PosAxes    bool  // positive axes where torch writes -1 (reductions, Softmax, LayerNormalization)
	NegAxes    bool  // negative axes where torch writes positive ones (Flatten, the mask's Unsqueeze)
	TanhGelu   bool  // GELU(approximate="tanh") written out
	SplitKT    bool  // K to [B, h, dh, S] by two Transposes
	MinMask    bool  // the mask's large negative is the type's lowest value
	IntMask    bool  // the mask is int64 (Hugging Face's attention_mask), Cast to the float type after its Unsqueeze
	IndexVecs  bool  // Shape entries gathered by [1] indices (no Unsqueeze)
	MinusOne   bool  // the merge Reshape target is [B, S, -1]
	BiasFirst  bool  // Add(bias, MatMul) rather than Add(MatMul, bias)
	Taken      bool  // torchGate: the branch runs
	NoSubShape bool  // torchGate: the branch outputs carry no shape
	Refine     bool  // torchGate: the branch's network reads the detector's last hidden features, not the input
	Dynamic    bool  // inputs declared with a symbolic batch dimension (torch.onnx.export's dynamic_axes)
	Causal     bool  // torchAttn, torchEmbedAttn: triu(full((S, S), lowest), diagonal=1) added to the scores
	HFMask     bool  // with IntMask: the 4-D causal and padding mask as Hugging Face's newer models build it (hfMask)
	KVHeads    int64 // torchLlama: key and value heads (grouped-query attention, repeat_kv); 0: Heads
	Img, Patch int64 // torchViT: the image's side and the patch's
	Bilinear   bool  // torchUNet: F.interpolate's mode bilinear (else nearest)
}

// torchCases are the cases of -torch, in the order they are written.
func torchCases() []torchCase {
	f32, f16 := onnx.Float, onnx.Float16
	return []torchCase{
		// Classifiers: Flatten, Gemm, decomposed LayerNorm, Relu, a head.
		{Name: "tmlp_b1_c3x7x10_softmax_op13", Family: torchMLP, Opset: 13, DType: f32, Batch: 1,
			In: []int64{3, 7, 10}, Widths: []int64{40, 40}, Classes: 10, Head: "softmax"},
		{Name: "tmlp_b3_c5x19_logsoftmax_op14", Family: torchMLP, Opset: 14, DType: f32, Batch: 3,
			In: []int64{5, 19}, Widths: []int64{36}, Classes: 7, Head: "logsoftmax", PosAxes: true},
		{Name: "tmlp_b2_c4x25_nativeln_op17", Family: torchMLP, Opset: 17, DType: f32, Batch: 2,
			In: []int64{4, 25}, Widths: []int64{100, 52}, Classes: 5, Head: "softmax", NativeLN: true},
		{Name: "tmlp_b5_c2x3x9_keepdims0_op13", Family: torchMLP, Opset: 13, DType: f32, Batch: 5,
			In: []int64{2, 3, 9}, Widths: []int64{24}, Classes: 3, Head: "sigmoid", KeepDims0: true, NegAxes: true},
		{Name: "tmlp_b2_c6x11_fp16_op14", Family: torchMLP, Opset: 14, DType: f16, Batch: 2,
			In: []int64{6, 11}, Widths: []int64{48, 24}, Classes: 6, Head: "softmax"},

		{Name: "tmlp_b7_c3x5x5_op17", Family: torchMLP, Opset: 17, DType: f32, Batch: 7,
			In: []int64{3, 5, 5}, Widths: []int64{30, 30, 30}, Classes: 2, Head: "softmax", PosAxes: true},
		{Name: "tmlp_b3_c4x9_fp16_nativeln_op17", Family: torchMLP, Opset: 17, DType: f16, Batch: 3,
			In: []int64{4, 9}, Widths: []int64{40}, Classes: 9, Head: "logsoftmax", NativeLN: true},

		// Gated detectors.
		{Name: "tgate_b1_c6x21_taken_op13", Family: torchGate, Opset: 13, DType: f32, Batch: 1,
			In: []int64{6, 21}, Widths: []int64{36, 36}, Taken: true},
		{Name: "tgate_b1_c6x21_skipped_op13", Family: torchGate, Opset: 13, DType: f32, Batch: 1,
			In: []int64{6, 21}, Widths: []int64{36, 36}},
		{Name: "tgate_b3_c5x7_taken_op14", Family: torchGate, Opset: 14, DType: f32, Batch: 3,
			In: []int64{5, 7}, Widths: []int64{20}, Taken: true, NoSubShape: true, NegAxes: true},
		{Name: "tgate_b2_c3x4x5_skipped_op17", Family: torchGate, Opset: 17, DType: f32, Batch: 2,
			In: []int64{3, 4, 5}, Widths: []int64{28}, NativeLN: true, PosAxes: true},

		{Name: "tgate_b1_c2x50_refine_taken_op14", Family: torchGate, Opset: 14, DType: f32, Batch: 1,
			In: []int64{2, 50}, Widths: []int64{44}, Taken: true, Refine: true},
		{Name: "tgate_b1_c2x50_refine_skipped_op14", Family: torchGate, Opset: 14, DType: f32, Batch: 1,
			In: []int64{2, 50}, Widths: []int64{44}, Refine: true},

		// Embeddings.
		{Name: "temb_b2_s11_h40_op14", Family: torchEmbed, Opset: 14, DType: f32, Batch: 2,
			Seq: 11, Hidden: 40, Vocab: 97, Pos: posInit},
		{Name: "temb_b1_s7_h52_range_op13", Family: torchEmbed, Opset: 13, DType: f32, Batch: 1,
			Seq: 7, Hidden: 52, Vocab: 300, Pos: posRange, PosAxes: true},
		{Name: "temb_b3_s5_h24_slice_op17", Family: torchEmbed, Opset: 17, DType: f32, Batch: 3,
			Seq: 5, Hidden: 24, Vocab: 61, Pos: posSlice, NativeLN: true},
		{Name: "temb_b2_s9_h36_const_keepdims0_op14", Family: torchEmbed, Opset: 14, DType: f32, Batch: 2,
			Seq: 9, Hidden: 36, Vocab: 40, Pos: posConst, KeepDims0: true},
		{Name: "temb_b4_s3_h16_v1000_op13", Family: torchEmbed, Opset: 13, DType: f32, Batch: 4,
			Seq: 3, Hidden: 16, Vocab: 1000, Pos: posConst},
		{Name: "temb_b2_s9_h32_fp16_op14", Family: torchEmbed, Opset: 14, DType: f16, Batch: 2,
			Seq: 9, Hidden: 32, Vocab: 50, Pos: posInit},
		// FP16 keepdims=0 reductions: their [batch, seq] outputs have rows
		// of 7 and 3 halves, no multiple of 8 bytes.
		{Name: "temb_b3_s7_h20_fp16_keepdims0_op14", Family: torchEmbed, Opset: 14, DType: f16, Batch: 3,
			Seq: 7, Hidden: 20, Vocab: 33, Pos: posConst, KeepDims0: true},
		{Name: "tmlp_b2_c5x3x12_fp16_keepdims0_op13", Family: torchMLP, Opset: 13, DType: f16, Batch: 2,
			In: []int64{5, 3, 12}, Widths: []int64{20}, Classes: 4, Head: "softmax", KeepDims0: true},

		// Attention layers.
		{Name: "tattn_b2_s13_h40_n5_op14", Family: torchAttn, Opset: 14, DType: f32, Batch: 2,
			Seq: 13, Hidden: 40, Heads: 5, FFN: 72, BiasFirst: true, NegAxes: true},
		{Name: "tattn_b1_s9_h24_n3_tanh_op13", Family: torchAttn, Opset: 13, DType: f32, Batch: 1,
			Seq: 9, Hidden: 24, Heads: 3, FFN: 40, TanhGelu: true, SplitKT: true, IndexVecs: true},
		{Name: "tattn_b3_s17_h48_n4_op17", Family: torchAttn, Opset: 17, DType: f32, Batch: 3,
			Seq: 17, Hidden: 48, Heads: 4, FFN: 96, NativeLN: true, PosAxes: true, MinusOne: true},
		{Name: "tattn_b2_s6_h20_n2_minmask_op14", Family: torchAttn, Opset: 14, DType: f32, Batch: 2,
			Seq: 6, Hidden: 20, Heads: 2, FFN: 44, MinMask: true, KeepDims0: true},
		{Name: "tattn_b2_s13_h32_n2_fp16_op14", Family: torchAttn, Opset: 14, DType: f16, Batch: 2,
			Seq: 13, Hidden: 32, Heads: 2, FFN: 64},

		{Name: "tattn_b2_s11_h24_n3_dynamic_op14", Family: torchAttn, Opset: 14, DType: f32, Batch: 2,
			Seq: 11, Hidden: 24, Heads: 3, FFN: 40, Dynamic: true},
		{Name: "tmlp_b4_c3x11_dynamic_op13", Family: torchMLP, Opset: 13, DType: f32, Batch: 4,
			In: []int64{3, 11}, Widths: []int64{28}, Classes: 6, Head: "softmax", Dynamic: true},

		{Name: "tattn_b2_s33_h60_n6_op13", Family: torchAttn, Opset: 13, DType: f32, Batch: 2,
			Seq: 33, Hidden: 60, Heads: 6, FFN: 100, IndexVecs: true},
		{Name: "tattn_b1_s5_h28_n1_op18", Family: torchAttn, Opset: 18, DType: f32, Batch: 1,
			Seq: 5, Hidden: 28, Heads: 1, FFN: 56, NegAxes: true},

		{Name: "tattn_b4_s1_h16_n2_op14", Family: torchAttn, Opset: 14, DType: f32, Batch: 4,
			Seq: 1, Hidden: 16, Heads: 2, FFN: 32},

		// Embedding plus attention.
		{Name: "tembattn_b2_s10_h40_n5_op14", Family: torchEmbedAttn, Opset: 14, DType: f32, Batch: 2,
			Seq: 10, Hidden: 40, Heads: 5, FFN: 80, Vocab: 50, Pos: posSlice, NegAxes: true},
		{Name: "tembattn_b1_s15_h36_n3_tanh_op17", Family: torchEmbedAttn, Opset: 17, DType: f32, Batch: 1,
			Seq: 15, Hidden: 36, Heads: 3, FFN: 60, Vocab: 120, Pos: posRange, TanhGelu: true, NativeLN: true},
		{Name: "tembattn_b3_s7_h24_n2_intmask_op14", Family: torchEmbedAttn, Opset: 14, DType: f32, Batch: 3,
			Seq: 7, Hidden: 24, Heads: 2, FFN: 48, Vocab: 30, Pos: posSlice, IntMask: true},
		{Name: "tgate_b1_c4x6_fp16_taken_op14", Family: torchGate, Opset: 14, DType: f16, Batch: 1,
			In: []int64{4, 6}, Widths: []int64{16}, Taken: true},

		// Decoder masks and RoBERTa's positions, as newer exporters write
		// them: Trilu, CumSum and integer comparisons.
		{Name: "tembattn_b2_s9_h32_n4_causal_cumsum_op14", Family: torchEmbedAttn, Opset: 14, DType: f32, Batch: 2,
			Seq: 9, Hidden: 32, Heads: 4, FFN: 64, Vocab: 12, Pos: posCumsum, Causal: true},
		{Name: "tattn_b1_s12_h24_n2_causal_fp16_op14", Family: torchAttn, Opset: 14, DType: f16, Batch: 1,
			Seq: 12, Hidden: 24, Heads: 2, FFN: 48, Causal: true},
		{Name: "tembattn_b3_s8_h24_n2_hfmask_op14", Family: torchEmbedAttn, Opset: 14, DType: f32, Batch: 3,
			Seq: 8, Hidden: 24, Heads: 2, FFN: 40, Vocab: 40, Pos: posRange, IntMask: true, HFMask: true},

		// LLaMA-style decoder layers: RMSNorm, rotary embeddings (Cos,
		// Sin, rotate_half), SwiGLU.
		{Name: "tllama_b2_s10_h32_n4_op14", Family: torchLlama, Opset: 14, DType: f32, Batch: 2,
			Seq: 10, Hidden: 32, Heads: 4, FFN: 88},
		{Name: "tllama_b1_s12_h48_n3_fp16_op17", Family: torchLlama, Opset: 17, DType: f16, Batch: 1,
			Seq: 12, Hidden: 48, Heads: 3, FFN: 64},
		{Name: "tllama_b2_s9_h64_n8_kv2_op17", Family: torchLlama, Opset: 17, DType: f32, Batch: 2,
			Seq: 9, Hidden: 64, Heads: 8, KVHeads: 2, FFN: 96},
		{Name: "tllama_b3_s7_h20_n5_op14", Family: torchLlama, Opset: 14, DType: f32, Batch: 3,
			Seq: 7, Hidden: 20, Heads: 5, FFN: 36},

		// T5 encoder layers: the relative position bias folds (its
		// buckets cast log(0) = -Inf to int64 and select it away).
		{Name: "tt5_b2_s20_h32_n4_op14", Family: torchT5, Opset: 14, DType: f32, Batch: 2,
			Seq: 20, Hidden: 32, Heads: 4, FFN: 64},
		{Name: "tt5_b1_s40_h48_n6_fp16_op17", Family: torchT5, Opset: 17, DType: f16, Batch: 1,
			Seq: 40, Hidden: 48, Heads: 6, FFN: 96},

		// ViT: the patch embedding Conv, CLS token, one pre-norm layer.
		{Name: "tvit_b2_i32_p8_h48_n4_op14", Family: torchViT, Opset: 14, DType: f32, Batch: 2,
			Img: 32, Patch: 8, Hidden: 48, Heads: 4, FFN: 96},
		{Name: "tvit_b1_i24_p6_h36_n3_fp16_op17", Family: torchViT, Opset: 17, DType: f16, Batch: 1,
			Img: 24, Patch: 6, Hidden: 36, Heads: 3, FFN: 72, NativeLN: true},

		// A small ResNet: Conv, BatchNormalization, MaxPool, residual,
		// GlobalAveragePool.
		{Name: "tcnn_b2_i32_w16_op14", Family: torchCNN, Opset: 14, DType: f32, Batch: 2,
			Img: 32, Hidden: 16, Classes: 10},
		{Name: "tcnn_b1_i20_w12_fp16_op17", Family: torchCNN, Opset: 17, DType: f16, Batch: 1,
			Img: 20, Hidden: 12, Classes: 5},
		// ResNet-18's layout (7x7 stem, four stages of two blocks, the
		// downsamples) at an eighth of its widths, on 64x64 images.
		{Name: "tcnn_b1_i64_r18w8_op14", Family: torchCNN, Opset: 14, DType: f32, Batch: 1,
			Img: 64, Hidden: 8, Widths: []int64{8, 16, 32, 64}, Classes: 10},

		// A small UNet: MaxPool down, Resize up, the skip concatenated.
		{Name: "tunet_b1_i16_w8_op13", Family: torchUNet, Opset: 13, DType: f32, Batch: 1,
			Img: 16, Hidden: 8, Classes: 3},
		{Name: "tunet_b2_i12_w6_bilinear_fp16_op17", Family: torchUNet, Opset: 17, DType: f16, Batch: 2,
			Img: 12, Hidden: 6, Classes: 2, Bilinear: true},
	}
}

// torchSmoke are the cases of -torch -smoke, committed under
// testdata/models/torch-sizes (about 0.4 MB) and run by make test.
var torchSmoke = []string{
	"tmlp_b5_c2x3x9_keepdims0_op13",
	"tmlp_b2_c6x11_fp16_op14",
	"tmlp_b3_c4x9_fp16_nativeln_op17",
	"tgate_b3_c5x7_taken_op14",
	"tgate_b2_c3x4x5_skipped_op17",
	"tgate_b1_c2x50_refine_taken_op14",
	"tgate_b1_c2x50_refine_skipped_op14",
	"temb_b3_s5_h24_slice_op17",
	"temb_b2_s9_h36_const_keepdims0_op14",
	"temb_b3_s7_h20_fp16_keepdims0_op14",
	"tattn_b2_s6_h20_n2_minmask_op14",
	"tattn_b1_s9_h24_n3_tanh_op13",
	"tattn_b2_s11_h24_n3_dynamic_op14",
	"tattn_b1_s5_h28_n1_op18",
	"tembattn_b2_s10_h40_n5_op14",
	"tembattn_b3_s7_h24_n2_intmask_op14",
	"tattn_b4_s1_h16_n2_op14",
	"tembattn_b2_s9_h32_n4_causal_cumsum_op14",
	"tattn_b1_s12_h24_n2_causal_fp16_op14",
	"tembattn_b3_s8_h24_n2_hfmask_op14",
	"tllama_b2_s10_h32_n4_op14",
	"tllama_b1_s12_h48_n3_fp16_op17",
	"tt5_b2_s20_h32_n4_op14",
	"tvit_b2_i32_p8_h48_n4_op14",
	"tcnn_b2_i32_w16_op14",
	"tunet_b1_i16_w8_op13",
	"tunet_b2_i12_w6_bilinear_fp16_op17",
}

// seed is the case's PCG seed, a hash of its name.
func (c torchCase) seed() uint64 {
	h := fnv.New64a()
	h.Write([]byte(c.Name))
	return h.Sum64()
}

// check reports a configuration the generator cannot write.
func (c torchCase) check() error {
	if c.DType != onnx.Float && c.DType != onnx.Float16 {
		return fmt.Errorf("torch case %s: element type %v: want float or float16", c.Name, c.DType)
	}
	if c.Opset < 13 || c.Opset > 21 {
		return fmt.Errorf("torch case %s: opset %d: want 13 to 21", c.Name, c.Opset)
	}
	if c.Batch < 1 {
		return fmt.Errorf("torch case %s: batch %d", c.Name, c.Batch)
	}
	switch c.Family {
	case torchMLP, torchGate:
		if len(c.In) == 0 || len(c.Widths) == 0 {
			return fmt.Errorf("torch case %s: needs In and Widths", c.Name)
		}
		if c.Family == torchMLP && c.Classes < 1 {
			return fmt.Errorf("torch case %s: classes %d", c.Name, c.Classes)
		}
	case torchCNN:
		least := int64(8) // a ResNet-18's stages halve the image after the stem's and the pool's halvings
		if n := len(c.Widths); n > 0 {
			least = 4 << n
		}
		if c.Img < least || c.Hidden < 1 || c.Classes < 1 {
			return fmt.Errorf("torch case %s: image %d width %d classes %d", c.Name, c.Img, c.Hidden, c.Classes)
		}
	case torchUNet:
		if c.Img < 4 || c.Img%2 != 0 || c.Hidden < 1 || c.Classes < 1 {
			return fmt.Errorf("torch case %s: image %d (even) width %d classes %d", c.Name, c.Img, c.Hidden, c.Classes)
		}
	case torchViT:
		if c.Patch < 1 || c.Img < c.Patch || c.Img%c.Patch != 0 || c.Heads < 1 || c.Hidden%c.Heads != 0 || c.FFN < 1 {
			return fmt.Errorf("torch case %s: image %d patch %d hidden %d heads %d ffn %d", c.Name, c.Img, c.Patch, c.Hidden, c.Heads, c.FFN)
		}
	case torchT5:
		if c.Seq < 1 || c.Heads < 1 || c.Hidden%c.Heads != 0 || c.FFN < 1 {
			return fmt.Errorf("torch case %s: seq %d hidden %d heads %d ffn %d", c.Name, c.Seq, c.Hidden, c.Heads, c.FFN)
		}
	case torchLlama:
		if c.Seq < 1 || c.Heads < 1 || c.Hidden%(2*c.Heads) != 0 || c.FFN < 1 || c.KVHeads < 0 || c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
			return fmt.Errorf("torch case %s: seq %d hidden %d heads %d (%d for keys and values) ffn %d (an even head width)", c.Name, c.Seq, c.Hidden, c.Heads, c.KVHeads, c.FFN)
		}
	case torchEmbed, torchAttn, torchEmbedAttn:
		if c.Seq < 1 || c.Hidden < 1 {
			return fmt.Errorf("torch case %s: seq %d hidden %d", c.Name, c.Seq, c.Hidden)
		}
		if c.Family != torchEmbed && (c.Heads < 1 || c.Hidden%c.Heads != 0 || c.FFN < 1) {
			return fmt.Errorf("torch case %s: hidden %d heads %d ffn %d", c.Name, c.Hidden, c.Heads, c.FFN)
		}
		if c.Family != torchAttn && c.Vocab < 2 {
			return fmt.Errorf("torch case %s: vocab %d", c.Name, c.Vocab)
		}
	default:
		return fmt.Errorf("torch case %s: unknown family %d", c.Name, c.Family)
	}
	return nil
}

// torchBuilder writes a model as torch.onnx.export names things: nodes
// /scope/Op_N, values /scope/Op_N_output_0, parameters scope.weight.
type torchBuilder struct {
	c     torchCase
	r     *rand.Rand
	b     *onnx.ModelBuilder
	nodes *[]onnx.Node // where node appends
	count map[string]int
	inits map[string]bool
	// hidden is the last hidden features mlp computed.
	hidden string
	// fixed holds parameters set to one value rather than drawn.
	fixed map[string]float64
}

func newTorchBuilder(c torchCase) *torchBuilder {
	b := onnx.NewModel(c.Opset)
	// torch 2.x writes ir_version 8 whatever the opset.
	b.IRVersion = 8
	b.Producer, b.GraphName = "ipu genmodels -torch", "main_graph"
	main := []onnx.Node{}
	return &torchBuilder{c: c, r: rand.New(rand.NewPCG(c.seed(), weightStream)), b: b,
		nodes: &main, count: map[string]int{}, inits: map[string]bool{}, fixed: map[string]float64{}}
}

// node appends op in scope, reading ins, and returns its first output's
// name (n outputs: name_output_0 ...).
func (t *torchBuilder) node(scope, op string, ins []string, attrs ...onnx.Attr) string {
	base := scope + "/" + op
	if k := t.count[base]; k > 0 {
		base = fmt.Sprintf("%s_%d", base, k)
	}
	t.count[scope+"/"+op]++
	out := base + "_output_0"
	*t.nodes = append(*t.nodes, onnx.Node{Name: base, OpType: op, Inputs: ins, Outputs: []string{out}, Attrs: attrs})
	return out
}

// floatTensor rounds v once to the case's type.
func (t *torchBuilder) floatTensor(name string, dims []int64, v []float64) *onnx.Tensor {
	out, err := hostref.Encode(name, t.c.DType, dims, v)
	if err != nil {
		panic(err)
	}
	return out
}

// constF appends a Constant node holding the scalar v of the case's type.
func (t *torchBuilder) constF(scope string, v float64) string {
	return t.node(scope, "Constant", nil, onnx.TensorAttr("value", t.floatTensor("", nil, []float64{v})))
}

// constI appends a Constant node holding int64 v with the given dims.
func (t *torchBuilder) constI(scope string, dims []int64, v ...int64) string {
	return t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewInt64("", dims, v)))
}

// param adds an initializer drawn uniform in [lo, hi).
func (t *torchBuilder) param(name string, dims []int64, lo, hi float64) string {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := uniform(t.r, n, lo, hi)
	if f, ok := t.fixed[name]; ok {
		for i := range v {
			v[i] = f
		}
	}
	t.b.AddInitializer(t.floatTensor(name, dims, v))
	t.inits[name] = true
	return name
}

// axis returns a negative axis as the case writes it: as is, or counted
// from the front of a tensor of the given rank.
func (t *torchBuilder) axis(a, rank int64) int64 {
	if t.c.PosAxes && a < 0 {
		return a + rank
	}
	return a
}

// reduceMean appends ReduceMean over the axis (axes attribute before
// opset 18, an input from 18).
func (t *torchBuilder) reduceMean(scope, x string, axis int64, keep bool) string {
	var attrs []onnx.Attr
	if !keep {
		attrs = append(attrs, onnx.IntAttr("keepdims", 0))
	}
	if t.c.Opset >= 18 {
		ax := t.constI(scope, []int64{1}, axis)
		return t.node(scope, "ReduceMean", []string{x, ax}, attrs...)
	}
	return t.node(scope, "ReduceMean", []string{x}, append([]onnx.Attr{onnx.IntsAttr("axes", axis)}, attrs...)...)
}

// unsqueeze appends Unsqueeze with its axes as a Constant input (opset 13
// on).
func (t *torchBuilder) unsqueeze(scope, x string, axes ...int64) string {
	ax := t.constI(scope, []int64{int64(len(axes))}, axes...)
	return t.node(scope, "Unsqueeze", []string{x, ax})
}

// layerNorm normalizes x (of the given rank) over its last axis of width
// h with parameters scope.weight and scope.bias.
func (t *torchBuilder) layerNorm(scope, x string, rank, h int64) string {
	g := t.param(paramName(scope)+".weight", []int64{h}, 0.8, 1.2)
	bias := t.param(paramName(scope)+".bias", []int64{h}, -0.05, 0.05)
	ax := t.axis(-1, rank)
	if t.c.NativeLN {
		return t.node(scope, "LayerNormalization", []string{x, g, bias},
			onnx.IntAttr("axis", ax), onnx.FloatAttr("epsilon", layerNormEpsilon))
	}
	keep := !t.c.KeepDims0
	mu := t.reduceMean(scope, x, ax, keep)
	if !keep {
		mu = t.unsqueeze(scope, mu, -1)
	}
	d := t.node(scope, "Sub", []string{x, mu})
	d2 := t.node(scope, "Pow", []string{d, t.constF(scope, 2)})
	v := t.reduceMean(scope, d2, ax, keep)
	ve := t.node(scope, "Add", []string{v, t.constF(scope, layerNormEpsilon)})
	sd := t.node(scope, "Sqrt", []string{ve})
	if !keep {
		sd = t.unsqueeze(scope, sd, -1)
	}
	n := t.node(scope, "Div", []string{d, sd})
	n = t.node(scope, "Mul", []string{n, g})
	return t.node(scope, "Add", []string{n, bias})
}

// gemm appends nn.Linear on a 2-D x as torch exports it: Gemm(x, W, b,
// transB=1) with W [out, in].
func (t *torchBuilder) gemm(scope, x string, in, out int64) string {
	a := 1 / math.Sqrt(float64(in))
	w := t.param(paramName(scope)+".weight", []int64{out, in}, -a, a)
	b := t.param(paramName(scope)+".bias", []int64{out}, -a, a)
	return t.node(scope, "Gemm", []string{x, w, b},
		onnx.FloatAttr("alpha", 1), onnx.FloatAttr("beta", 1), onnx.IntAttr("transB", 1))
}

// linear appends nn.Linear on x of rank 3 as torch exports it: MatMul by
// the transposed weight (an onnx::MatMul_N initializer), Add of the bias.
func (t *torchBuilder) linear(scope, x string, in, out int64) string {
	a := 1 / math.Sqrt(float64(in))
	w := t.param(fmt.Sprintf("onnx::MatMul_%d", len(t.inits)+100), []int64{in, out}, -a, a)
	b := t.param(paramName(scope)+".bias", []int64{out}, -0.05, 0.05)
	mm := t.node(scope, "MatMul", []string{x, w})
	if t.c.BiasFirst {
		return t.node(scope, "Add", []string{b, mm})
	}
	return t.node(scope, "Add", []string{mm, b})
}

// gelu appends GELU written out: through Erf (nn.GELU()) or Tanh
// (approximate="tanh"), as torch exports it before opset 20.
func (t *torchBuilder) gelu(scope, x string) string {
	if t.c.TanhGelu {
		cube := t.node(scope, "Pow", []string{x, t.constF(scope, 3)})
		c := t.node(scope, "Mul", []string{t.constF(scope, 0.044715), cube})
		s := t.node(scope, "Add", []string{x, c})
		s = t.node(scope, "Mul", []string{t.constF(scope, math.Sqrt(2/math.Pi)), s})
		th := t.node(scope, "Tanh", []string{s})
		one := t.node(scope, "Add", []string{t.constF(scope, 1), th})
		h := t.node(scope, "Mul", []string{t.constF(scope, 0.5), x})
		return t.node(scope, "Mul", []string{h, one})
	}
	d := t.node(scope, "Div", []string{x, t.constF(scope, math.Sqrt2)})
	e := t.node(scope, "Erf", []string{d})
	one := t.node(scope, "Add", []string{e, t.constF(scope, 1)})
	m := t.node(scope, "Mul", []string{x, one})
	return t.node(scope, "Mul", []string{m, t.constF(scope, 0.5)})
}

// mlp appends a classifier body over x ([Batch, In...]) in scope: Flatten,
// then per width Gemm, LayerNorm, Relu, then the head Gemm to classes.
func (t *torchBuilder) mlp(scope, x string, classes int64) string {
	c := t.c
	// Flatten(axis=1), as torch.flatten(x, 1) exports, or the same axis
	// counted from the back.
	axis := int64(1)
	if c.NegAxes {
		axis = -int64(len(c.In))
	}
	flat := t.node(scope+"/flatten", "Flatten", []string{x}, onnx.IntAttr("axis", axis))
	in := int64(1)
	for _, d := range c.In {
		in *= d
	}
	h := flat
	for l, w := range c.Widths {
		s := fmt.Sprintf("%s/fc%d", scope, l)
		h = t.gemm(s, h, in, w)
		h = t.layerNorm(fmt.Sprintf("%s/ln%d", scope, l), h, 2, w)
		h = t.node(fmt.Sprintf("%s/act%d", scope, l), "Relu", []string{h})
		in = w
	}
	t.hidden = h
	return t.gemm(scope+"/head", h, in, classes)
}

// model returns the case's model, its input tensors and the names of its
// outputs with their shapes.
func (c torchCase) model() ([]byte, []*onnx.Tensor) {
	t := newTorchBuilder(c)
	in := rand.New(rand.NewPCG(c.seed(), inputStream))
	var inputs []*onnx.Tensor
	addInput := func(name string, d onnx.DataType, dims []int64, tensor *onnx.Tensor) {
		if c.Dynamic && len(dims) > 0 {
			shape := []onnx.Dim{{Value: -1, Param: "batch_size"}}
			for _, n := range dims[1:] {
				shape = append(shape, onnx.Dim{Value: n})
			}
			t.b.AddInputInfo(onnx.ValueInfo{Name: name, DType: d, HasShape: true, Shape: shape})
		} else {
			t.b.AddInput(name, d, dims)
		}
		inputs = append(inputs, tensor)
	}
	floatInput := func(name string, dims []int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		addInput(name, c.DType, dims, t.floatTensor(name, dims, uniform(in, n, -1, 1)))
	}
	type output struct {
		name  string
		shape []int64
	}
	var outs []output
	switch c.Family {
	case torchMLP:
		xShape := append([]int64{c.Batch}, c.In...)
		floatInput("input", xShape)
		logits := t.mlp("", "input", c.Classes)
		var y string
		switch c.Head {
		case "softmax":
			y = t.node("", "Softmax", []string{logits}, onnx.IntAttr("axis", t.axis(-1, 2)))
		case "logsoftmax":
			y = t.node("", "LogSoftmax", []string{logits}, onnx.IntAttr("axis", t.axis(-1, 2)))
		default:
			y = t.node("", "Sigmoid", []string{logits})
		}
		outs = append(outs, output{y, []int64{c.Batch, c.Classes}})
	case torchGate:
		xShape := append([]int64{c.Batch}, c.In...)
		floatInput("input", xShape)
		// The detector head's bias decides the branch: sigmoid(+-6 + small).
		t.fixed["detector.head.bias"] = -6
		if c.Taken {
			t.fixed["detector.head.bias"] = 6
		}
		score := t.node("/detector", "Sigmoid", []string{t.mlp("/detector", "input", 1)})
		s := score
		if c.Batch > 1 {
			// if scores.max() >= thr: over every axis, keepdims=0.
			s = t.node("", "ReduceMax", []string{score}, onnx.IntAttr("keepdims", 0))
		}
		ge := t.node("", "GreaterOrEqual", []string{s, t.constF("", 0.5)})
		cond := t.node("", "Cast", []string{ge}, onnx.IntAttr("to", int64(onnx.Bool)))

		shape := []int64{c.Batch, 1}
		info := func(name string) onnx.ValueInfo {
			vi := onnx.ValueInfo{Name: name, DType: c.DType}
			if !c.NoSubShape {
				vi.HasShape = true
				for _, d := range shape {
					vi.Shape = append(vi.Shape, onnx.Dim{Value: d})
				}
			}
			return vi
		}
		outer := t.nodes
		var thenNodes, elseNodes []onnx.Node
		t.nodes = &thenNodes
		var v string
		if c.Refine {
			// A head on the detector's last hidden features (an outer
			// value computed on the device): Gemm, Relu, Gemm, Sigmoid.
			w := c.Widths[len(c.Widths)-1]
			h := t.node("/refine/act", "Relu", []string{t.gemm("/refine/fc", t.hidden, w, w)})
			v = t.node("/refine", "Sigmoid", []string{t.gemm("/refine/head", h, w, 1)})
		} else {
			v = t.node("/verifier", "Sigmoid", []string{t.mlp("/verifier", "input", 1)})
		}
		t.nodes = &elseNodes
		e := t.node("", "Identity", []string{score})
		t.nodes = outer
		then := &onnx.Graph{Name: "then_branch", Nodes: thenNodes, Outputs: []onnx.ValueInfo{info(v)}}
		els := &onnx.Graph{Name: "else_branch", Nodes: elseNodes, Outputs: []onnx.ValueInfo{info(e)}}
		y := t.node("", "If", []string{cond}, onnx.GraphAttr("then_branch", then), onnx.GraphAttr("else_branch", els))
		outs = append(outs, output{y, shape})
		if c.Batch > 1 {
			outs = append(outs, output{score, shape})
		}
	case torchEmbed, torchEmbedAttn:
		ids := make([]int64, c.Batch*c.Seq)
		for i := range ids {
			ids[i] = int64(in.Uint64() % uint64(c.Vocab))
		}
		dims := []int64{c.Batch, c.Seq}
		addInput("input_ids", onnx.Int64, dims, onnx.NewInt64("input_ids", dims, ids))
		var mask string
		if c.Family == torchEmbedAttn {
			mask = t.maskInput(in, addInput)
		}
		x := t.embeddings(c.Batch)
		if c.Family == torchEmbedAttn {
			x = t.attention("/encoder/layer.0", x, mask)
		}
		outs = append(outs, output{x, []int64{c.Batch, c.Seq, c.Hidden}})
	case torchCNN:
		floatInput("input", []int64{c.Batch, 3, c.Img, c.Img})
		outs = append(outs, output{t.cnn("input"), []int64{c.Batch, c.Classes}})
	case torchUNet:
		floatInput("input", []int64{c.Batch, 3, c.Img, c.Img})
		outs = append(outs, output{t.unet("input"), []int64{c.Batch, c.Classes, c.Img, c.Img}})
	case torchViT:
		floatInput("pixel_values", []int64{c.Batch, 3, c.Img, c.Img})
		n := (c.Img / c.Patch) * (c.Img / c.Patch)
		outs = append(outs, output{t.vit("pixel_values"), []int64{c.Batch, n + 1, c.Hidden}})
	case torchT5:
		floatInput("hidden_states", []int64{c.Batch, c.Seq, c.Hidden})
		y := t.t5("/encoder/block.0", "hidden_states")
		outs = append(outs, output{y, []int64{c.Batch, c.Seq, c.Hidden}})
	case torchLlama:
		floatInput("hidden_states", []int64{c.Batch, c.Seq, c.Hidden})
		// positions as a generation step passes them: each sequence
		// from its own offset
		pos := make([]int64, c.Batch*c.Seq)
		for i := range pos {
			pos[i] = int64(i)%c.Seq + 5*(int64(i)/c.Seq)
		}
		dims := []int64{c.Batch, c.Seq}
		addInput("position_ids", onnx.Int64, dims, onnx.NewInt64("position_ids", dims, pos))
		y := t.llama("/model/layers.0", "hidden_states", "position_ids")
		outs = append(outs, output{y, []int64{c.Batch, c.Seq, c.Hidden}})
	case torchAttn:
		floatInput("hidden_states", []int64{c.Batch, c.Seq, c.Hidden})
		mask := t.maskInput(in, addInput)
		y := t.attention("/layer.0", "hidden_states", mask)
		outs = append(outs, output{y, []int64{c.Batch, c.Seq, c.Hidden}})
	}
	// Graph outputs get the names torch gives them: renamed through the
	// producing node (torch names its outputs by the forward's names).
	for i, o := range outs {
		name := "output"
		if i > 0 {
			name = fmt.Sprintf("output_%d", i)
		}
		t.rename(o.name, name)
		t.b.AddOutput(name, c.DType, o.shape)
	}
	for _, n := range *t.nodes {
		t.b.AddNode(n.OpType, n.Name, n.Inputs, n.Outputs, n.Attrs...)
	}
	return t.b.Marshal(), inputs
}

// rename renames value from to to in every node (outputs and inputs, in
// branches too).
func (t *torchBuilder) rename(from, to string) {
	var walk func(nodes []onnx.Node)
	walk = func(nodes []onnx.Node) {
		for i := range nodes {
			n := &nodes[i]
			for k, s := range n.Inputs {
				if s == from {
					n.Inputs[k] = to
				}
			}
			for k, s := range n.Outputs {
				if s == from {
					n.Outputs[k] = to
				}
			}
			for _, a := range n.Attrs {
				if a.G != nil {
					walk(a.G.Nodes)
					for k := range a.G.Outputs {
						if a.G.Outputs[k].Name == from {
							a.G.Outputs[k].Name = to
						}
					}
				}
			}
		}
	}
	walk(*t.nodes)
}

// maskInput adds the float attention mask [B, S]: ones, then zeros past
// each row's length (at least one).
func (t *torchBuilder) maskInput(r *rand.Rand, add func(string, onnx.DataType, []int64, *onnx.Tensor)) string {
	c := t.c
	v := make([]float64, c.Batch*c.Seq)
	for b := range c.Batch {
		n := c.Seq
		if b > 0 || c.Batch == 1 {
			n = 1 + int64(r.Uint64()%uint64(c.Seq))
		}
		for s := range n {
			v[b*c.Seq+s] = 1
		}
	}
	dims := []int64{c.Batch, c.Seq}
	if c.IntMask {
		ints := make([]int64, len(v))
		for i, x := range v {
			ints[i] = int64(x)
		}
		add("attention_mask", onnx.Int64, dims, onnx.NewInt64("attention_mask", dims, ints))
		return "attention_mask"
	}
	add("attention_mask", c.DType, dims, t.floatTensor("attention_mask", dims, v))
	return "attention_mask"
}

// embeddings appends word and position embeddings of input_ids and their
// LayerNorm; it returns [B, S, H].
func (t *torchBuilder) embeddings(batch int64) string {
	c := t.c
	const scope = "/embeddings"
	wemb := t.param("embeddings.word_embeddings.weight", []int64{c.Vocab, c.Hidden}, -1, 1)
	maxPos := 2*c.Seq + 3
	pemb := t.param("embeddings.position_embeddings.weight", []int64{maxPos, c.Hidden}, -0.5, 0.5)
	we := t.node(scope+"/word_embeddings", "Gather", []string{wemb, "input_ids"})
	seqRange := make([]int64, c.Seq)
	for i := range seqRange {
		seqRange[i] = int64(i)
	}
	var pos string
	switch c.Pos {
	case posInit:
		pos = "onnx::Gather_pos"
		t.b.AddInitializer(onnx.NewInt64(pos, []int64{c.Seq}, seqRange))
	case posConst:
		pos = t.constI(scope, []int64{1, c.Seq}, seqRange...)
	case posRange:
		zero := t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewInt64("", nil, []int64{0})))
		end := t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewInt64("", nil, []int64{c.Seq})))
		step := t.node(scope, "Constant", nil, onnx.TensorAttr("value", onnx.NewInt64("", nil, []int64{1})))
		r := t.node(scope, "Range", []string{zero, end, step})
		pos = t.unsqueeze(scope, r, 0)
	case posSlice:
		all := make([]int64, maxPos)
		for i := range all {
			all[i] = int64(i)
		}
		t.b.AddInitializer(onnx.NewInt64("embeddings.position_ids", []int64{1, maxPos}, all))
		pos = t.node(scope, "Slice", []string{"embeddings.position_ids",
			t.constI(scope, []int64{1}, 0), t.constI(scope, []int64{1}, c.Seq),
			t.constI(scope, []int64{1}, 1), t.constI(scope, []int64{1}, 1)})
	case posCumsum:
		// mask = input_ids.ne(1).int(); (torch.cumsum(mask, dim=1).type_as(mask)
		// * mask).long() + 1
		pad := t.constI(scope, nil, 1)
		eq := t.node(scope, "Equal", []string{"input_ids", pad})
		m := t.node(scope, "Cast", []string{t.node(scope, "Not", []string{eq})}, onnx.IntAttr("to", int64(onnx.Int32)))
		cs := t.node(scope, "CumSum", []string{m, t.constI(scope, nil, 1)})
		cs = t.node(scope, "Cast", []string{cs}, onnx.IntAttr("to", int64(onnx.Int32)))
		inc := t.node(scope, "Mul", []string{cs, m})
		inc = t.node(scope, "Cast", []string{inc}, onnx.IntAttr("to", int64(onnx.Int64)))
		pos = t.node(scope, "Add", []string{inc, pad})
	}
	pe := t.node(scope+"/position_embeddings", "Gather", []string{pemb, pos})
	e := t.node(scope, "Add", []string{we, pe})
	return t.layerNorm(scope+"/LayerNorm", e, 3, c.Hidden)
}

// attention appends one post-norm encoder layer over x [B, S, H] with the
// float mask [B, S].
func (t *torchBuilder) attention(scope, x, mask string) string {
	c := t.c
	dh := c.Hidden / c.Heads
	sa := scope + "/attention/self"
	// Reshape targets from the input's shape.
	xs := t.node(sa, "Shape", []string{x})
	dim := func(i int64) string {
		if c.IndexVecs {
			return t.node(sa, "Gather", []string{xs, t.constI(sa, []int64{1}, i)}, onnx.IntAttr("axis", 0))
		}
		g := t.node(sa, "Gather", []string{xs, t.constI(sa, nil, i)}, onnx.IntAttr("axis", 0))
		return t.unsqueeze(sa, g, 0)
	}
	bsz, seq := dim(0), dim(1)
	hshape := t.node(sa, "Concat", []string{bsz, seq, t.constI(sa, []int64{2}, c.Heads, dh)}, onnx.IntAttr("axis", 0))
	merge := c.Hidden
	if c.MinusOne {
		merge = -1
	}
	mshape := t.node(sa, "Concat", []string{bsz, seq, t.constI(sa, []int64{1}, merge)}, onnx.IntAttr("axis", 0))

	heads := func(name string, perm ...int64) string {
		p := t.linear(sa+"/"+name, x, c.Hidden, c.Hidden)
		r := t.node(sa, "Reshape", []string{p, hshape})
		return t.node(sa, "Transpose", []string{r}, onnx.IntsAttr("perm", perm...))
	}
	q := heads("query", 0, 2, 1, 3)
	var k string
	if c.SplitKT {
		k = heads("key", 0, 2, 1, 3)
		k = t.node(sa, "Transpose", []string{k}, onnx.IntsAttr("perm", 0, 1, 3, 2))
	} else {
		k = heads("key", 0, 2, 3, 1)
	}
	v := heads("value", 0, 2, 1, 3)
	sc := t.node(sa, "MatMul", []string{q, k})
	sc = t.node(sa, "Div", []string{sc, t.constF(sa, math.Sqrt(float64(dh)))})
	if c.Causal {
		lowest := -math.MaxFloat32
		if c.DType == onnx.Float16 {
			lowest = -65504
		}
		ss := t.node(sa, "Concat", []string{seq, seq}, onnx.IntAttr("axis", 0))
		full := t.node(sa, "ConstantOfShape", []string{ss}, onnx.TensorAttr("value", t.floatTensor("", []int64{1}, []float64{lowest})))
		sc = t.node(sa, "Add", []string{sc, t.node(sa, "Trilu", []string{full, t.constI(sa, nil, 1)})})
	}
	if c.HFMask {
		sc = t.node(sa, "Add", []string{sc, t.hfMask(scope, mask)})
		return t.attentionRest(scope, sa, sc, v, mshape, x)
	}
	var m4 string
	if c.NegAxes {
		m4 = t.unsqueeze(scope, mask, -3, -2)
	} else {
		m4 = t.unsqueeze(scope, mask, 1, 2)
	}
	if c.IntMask {
		m4 = t.node(scope, "Cast", []string{m4}, onnx.IntAttr("to", int64(c.DType)))
	}
	inv := t.node(scope, "Sub", []string{t.constF(scope, 1), m4})
	big := -10000.0
	if c.MinMask {
		big = -math.MaxFloat32
		if c.DType == onnx.Float16 {
			big = -65504
		}
	}
	madd := t.node(scope, "Mul", []string{inv, t.constF(scope, big)})
	sc = t.node(sa, "Add", []string{sc, madd})
	return t.attentionRest(scope, sa, sc, v, mshape, x)
}

// attentionRest appends the softmax of the masked scores sc, the context
// and the layer's output over x.
func (t *torchBuilder) attentionRest(scope, sa, sc, v, mshape, x string) string {
	c := t.c
	p := t.node(sa, "Softmax", []string{sc}, onnx.IntAttr("axis", t.axis(-1, 4)))
	ctx := t.node(sa, "MatMul", []string{p, v})
	ctx = t.node(sa, "Transpose", []string{ctx}, onnx.IntsAttr("perm", 0, 2, 1, 3))
	ctx = t.node(sa, "Reshape", []string{ctx, mshape})
	o := t.linear(scope+"/attention/output/dense", ctx, c.Hidden, c.Hidden)
	r := t.node(scope+"/attention/output", "Add", []string{o, x})
	ln := t.layerNorm(scope+"/attention/output/LayerNorm", r, 3, c.Hidden)
	f := t.linear(scope+"/intermediate/dense", ln, c.Hidden, c.FFN)
	f = t.gelu(scope+"/intermediate/intermediate_act_fn", f)
	f = t.linear(scope+"/output/dense", f, c.FFN, c.Hidden)
	r2 := t.node(scope+"/output", "Add", []string{f, ln})
	return t.layerNorm(scope+"/output/LayerNorm", r2, 3, c.Hidden)
}

// hfMask appends the additive mask [B, 1, S, S] as transformers'
// _prepare_4d_causal_attention_mask_with_cache_position builds it from
// the int64 attention_mask [B, S], written as torch.onnx.export writes
// it: full((S, S), lowest), triu(diagonal=1), times arange(S) >
// cache_position (a Range against its Reshape to a column), expanded to
// [B, 1, S, S]; then its [:, :, :, :S] slice plus the mask, == 0, filled
// with lowest (Where) and assigned back (ScatterND with constant
// indices).
func (t *torchBuilder) hfMask(scope, mask string) string {
	c := t.c
	s, b := c.Seq, c.Batch
	lowest := -math.MaxFloat32
	if c.DType == onnx.Float16 {
		lowest = -65504
	}
	full := t.node(scope, "ConstantOfShape", []string{t.constI(scope, []int64{2}, s, s)},
		onnx.TensorAttr("value", t.floatTensor("", []int64{1}, []float64{lowest})))
	cm := t.node(scope, "Trilu", []string{full, t.constI(scope, nil, 1)})
	ar := t.node(scope, "Range", []string{t.constI(scope, nil, 0), t.constI(scope, nil, s), t.constI(scope, nil, 1)})
	cp := t.node(scope, "Reshape", []string{ar, t.constI(scope, []int64{2}, -1, 1)})
	gt := t.node(scope, "Greater", []string{ar, cp})
	cm = t.node(scope, "Mul", []string{cm, t.node(scope, "Cast", []string{gt}, onnx.IntAttr("to", int64(c.DType)))})
	cm = t.unsqueeze(scope, cm, 0, 1)
	cm = t.node(scope, "Expand", []string{cm, t.constI(scope, []int64{4}, b, 1, s, s)})
	am := t.node(scope, "Cast", []string{t.unsqueeze(scope, mask, 1, 2)}, onnx.IntAttr("to", int64(c.DType)))
	sl := t.node(scope, "Slice", []string{cm, t.constI(scope, []int64{1}, 0), t.constI(scope, []int64{1}, s),
		t.constI(scope, []int64{1}, 3), t.constI(scope, []int64{1}, 1)})
	pad := t.node(scope, "Equal", []string{t.node(scope, "Add", []string{sl, am}), t.constF(scope, 0)})
	filled := t.node(scope, "Where", []string{pad, t.constF(scope, lowest), sl})
	idx := make([]int64, 0, b*s*s*4)
	for i := range b {
		for r := range s {
			for k := range s {
				idx = append(idx, i, 0, r, k)
			}
		}
	}
	return t.node(scope, "ScatterND", []string{cm, t.constI(scope, []int64{b, 1, s, s, 4}, idx...), filled})
}

// torchExpected evaluates the model on inputs with the host reference in
// float64 and rounds each output once to its type.
func torchExpected(model []byte, inputs []*onnx.Tensor, threads int) ([]*onnx.Tensor, error) {
	m, err := onnx.ReadModel(model)
	if err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	g, err := graph.BuildWith(m, graph.BuildOptions{InputShapes: graph.InputShapesOf(m, inputs)})
	if err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	outs, err := hostref.Eval(g, inputs, hostref.Options{Precision: hostref.FP64, Threads: threads})
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	res := make([]*onnx.Tensor, len(outs))
	for i, y := range g.Outputs {
		v, err := outs[i].Float64s()
		if err != nil {
			return nil, fmt.Errorf("reference output %q: %w", y.Name, err)
		}
		if res[i], err = hostref.Encode(y.Name, y.DType, y.Shape, v); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// writeTorchCase writes the case in the ONNX backend test layout.
func writeTorchCase(dir string, c torchCase, threads int) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	model, inputs := c.model()
	outs, err := torchExpected(model, inputs, threads)
	if err != nil {
		return 0, fmt.Errorf("torch case %s: %w", c.Name, err)
	}
	data := filepath.Join(dir, c.Name, "test_data_set_0")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return 0, err
	}
	files := map[string][]byte{filepath.Join(dir, c.Name, "model.onnx"): model}
	for i, x := range inputs {
		files[filepath.Join(data, fmt.Sprintf("input_%d.pb", i))] = onnx.EncodeTensor(x)
	}
	for i, y := range outs {
		files[filepath.Join(data, fmt.Sprintf("output_%d.pb", i))] = onnx.EncodeTensor(y)
	}
	for path, b := range files {
		if err := atomicfile.Write(path, b); err != nil {
			return 0, err
		}
	}
	return len(model), nil
}

// torchLargeCases are the cases of -torch -large: full-size vision
// models (ResNet-18 at 224x224 with 1,000 classes, as torchvision's
// layout), minutes each through the pipeline, written only on request.
func torchLargeCases() []torchCase {
	r18 := []int64{64, 128, 256, 512}
	f32, f16 := onnx.Float, onnx.Float16
	return []torchCase{
		{Name: "resnet18_b1_i224_op14", Family: torchCNN, Opset: 14, DType: f32, Batch: 1,
			Img: 224, Hidden: 64, Widths: r18, Classes: 1000},
		{Name: "resnet18_b1_i224_fp16_op14", Family: torchCNN, Opset: 14, DType: f16, Batch: 1,
			Img: 224, Hidden: 64, Widths: r18, Classes: 1000},
	}
}

// runTorch writes the -torch cases (those named in only, or all; with
// large, the full-size ones) under out.
func runTorch(out, only string, large, verbose bool, threads int, log io.Writer) error {
	cases := torchCases()
	if large {
		cases = torchLargeCases()
	}
	if only != "" {
		byName := map[string]torchCase{}
		var names []string
		for _, c := range cases {
			byName[c.Name] = c
			names = append(names, c.Name)
		}
		cases = nil
		for name := range strings.SplitSeq(only, ",") {
			c, ok := byName[strings.TrimSpace(name)]
			if !ok {
				return fmt.Errorf("-case %q: not a -torch case (%s)", name, strings.Join(names, ", "))
			}
			cases = append(cases, c)
		}
	}
	for _, c := range cases {
		start := time.Now()
		n, err := writeTorchCase(out, c, threads)
		if err != nil {
			return err
		}
		if verbose {
			fmt.Fprintf(log, "genmodels: %s: model %.1f kB in %.2fs\n", c.Name, float64(n)/1e3, time.Since(start).Seconds())
		}
	}
	return nil
}

// paramName is the parameter prefix of a scope, as torch names module
// parameters: /encoder/layer.0/fc -> encoder.layer.0.fc.
func paramName(scope string) string {
	return strings.ReplaceAll(strings.TrimPrefix(scope, "/"), "/", ".")
}
