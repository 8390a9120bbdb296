module ipu.local/scripts

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0
	gonum.org/v1/gonum v0.17.0
	gonum.org/v1/plot v0.17.0
	ipu.local/formats v0.0.0
	ipu.local/libs v0.0.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace ipu.local/formats => ../formats

replace ipu.local/libs => ../libs
