package lower

import (
	"encoding/binary"
	"fmt"
	"math"

	"ipu.local/libs/onnx"
)

// DeviceSize is the bytes a tile stores per element of type d
// (plan.DeviceDTypeSize). The device computes indices in 32 bits: int64
// values (token ids, gather indices) are held as int32, narrowed by the
// host (graph inputs, see formats/obj) or at compile time (constants), a
// value outside the int32 range being an error there. BOOL is an FP32
// word, 0.0 or 1.0, so that comparisons, logic and selection are FP32
// kernels.
func DeviceSize(d onnx.DataType) int {
	switch d {
	case onnx.Int64, onnx.Bool:
		return 4
	}
	return d.ElemSize()
}

// narrowInt64 returns little-endian int64 data as int32, refusing a
// value outside the int32 range (what names the data in the message).
func narrowInt64(what string, raw []byte) ([]byte, error) {
	if len(raw)%8 != 0 {
		return nil, fmt.Errorf("%s: %d bytes of int64 data", what, len(raw))
	}
	out := make([]byte, len(raw)/2)
	for i := 0; i < len(raw)/8; i++ {
		v := int64(binary.LittleEndian.Uint64(raw[8*i:]))
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("%s: element %d is %d, outside the int32 range the device holds int64 values in", what, i, v)
		}
		binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(v)))
	}
	return out, nil
}
