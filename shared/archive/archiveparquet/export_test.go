package archiveparquet

import (
	"github.com/parquet-go/parquet-go"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// V1Row is a row of schema version 1, for tests that write such a file
// as the first encoder did.
type V1Row = v1Row

// ParquetRows are the rows Encode hands the Parquet writer for an
// archiver's object, for the benchmark of a stream image's way into a file.
func ParquetRows(o archive.Object) ([]parquet.Row, error) {
	s := schemaOf(archive.LayoutFor(o.Partition.Table))
	out := make([]parquet.Row, len(o.Rows))
	for i, r := range o.Rows {
		e, err := s.encode(r, o.Images[i])
		if err != nil {
			return nil, err
		}
		out[i] = e.row
	}
	return out, nil
}
