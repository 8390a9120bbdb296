module ipu.local/scripts

go 1.26.8

require (
	ipu.local/formats v0.0.0
	ipu.local/libs v0.0.0
)

replace ipu.local/formats => ../formats

replace ipu.local/libs => ../libs
