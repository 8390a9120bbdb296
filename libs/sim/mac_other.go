//go:build !amd64

package sim

func mac64(acc *[64]float32, x *[4]float32, w *[16]float32) { mac64Go(acc, x, w) }
