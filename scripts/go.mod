module ipu.local/scripts

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0
	gonum.org/v1/gonum v0.17.0
	ipu.local/libs v0.0.0
)

require google.golang.org/protobuf v1.36.12 // indirect

replace ipu.local/formats => ../formats

replace ipu.local/libs => ../libs
