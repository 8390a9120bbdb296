
BoutputJ&—?