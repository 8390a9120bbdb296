//go:build !amd64

package sim

// haveFmaPassSSE: no assembly on this host; fmaPass runs fmaPassGo.
const haveFmaPassSSE = false

func fmaPassSSE(mem *byte, half *[1 << 16]float32, off, stride uint32, y *[4]float32, z *[4]float64, n int64) int64 {
	panic("sim: fmaPassSSE without assembly")
}
