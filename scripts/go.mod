module ipu.local/scripts

go 1.26.8

require (
	ipu.local/formats v0.0.0
	ipu.local/libs v0.0.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)

replace ipu.local/formats => ../formats

replace ipu.local/libs => ../libs
