package archiveparquet

// V1Row is a row of schema version 1, for tests that write such a file
// as the first encoder did.
type V1Row = v1Row
