
BoutputJç Ô: