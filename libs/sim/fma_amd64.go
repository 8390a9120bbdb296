package sim

// haveFmaPassSSE: fmaPassSSE is the assembly of fma_amd64.s.
const haveFmaPassSSE = true

// fmaPassSSE is fmaPassGo for a strided operand a (mem[off], off +=
// stride) and an invariant one whose lanes' values are y, with SSE2
// (fma_amd64.s): it runs at most n iterations and returns how many it
// ran. The caller checks that every read is inside mem.
//
//go:noescape
func fmaPassSSE(mem *byte, half *[1 << 16]float32, off, stride uint32, y *[4]float32, z *[4]float64, n int64) int64
