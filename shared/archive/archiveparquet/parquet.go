// Package archiveparquet is the archive's Parquet codec: archive.Rows
// encoded in their table's archive.Layout as zstd-compressed Parquet, and
// decoded back exactly.
//
// # Schema (version 2)
//
// Every file has these columns, then its layout's typed columns (all
// optional: null where the item lacks the attribute or holds a value the
// column cannot hold exactly, which then stays in extra):
//
//	table            string, dictionary    the table's base name (the partition's)
//	month            string, dictionary    YYYY-MM (the partition's)
//	stream           string, dictionary    the stream's label; "snapshot" for a snapshot's rows
//	sequence_number  string                decimal; order with lpad(sequence_number, 40, '0')
//	event_name       string, dictionary    INSERT, MODIFY or REMOVE
//	recorded_at      timestamp (µs, UTC)   the record's ApproximateCreationDateTime
//	ttl_delete       boolean               the REMOVE was made by TTL expiry
//	image            string, dictionary    which image the typed columns and extra
//	                                       describe: new, old (a REMOVE) or keys
//	replayed         boolean               the row is its item's final state in a
//	                                       compacted month (archive.ReplayRows)
//	keys             optional string       type-tagged JSON of the keys; null when
//	                                       the layout derives them from the image
//	extra            optional string       type-tagged JSON of the image's other attributes
//	old_image        optional string       type-tagged JSON of the old image of an
//	                                       INSERT or MODIFY, when the stream carried it
//
// The image is thus the typed columns plus extra, nothing lost. Strings with
// few values are dictionary-encoded; the columns readers filter on keep
// their min and max in the page index (random ids and JSON do not: their
// bounds prune nothing and cost bytes). A replayed file is sorted by its
// layout's SortBy columns and records them as the row groups'
// sorting_columns, so a reader looking for one poll reads a page or two.
// The key-value metadata names the schema version and the layout.
package archiveparquet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// ErrSchema: a Parquet file that is not an archive file (its columns differ
// from its layout's).
var ErrSchema = errors.New("archiveparquet: not an archive file")

// ContentType is the media type the archive's objects are stored with.
const ContentType = "application/vnd.apache.parquet"

// Key-value metadata of every archive file.
const (
	SchemaVersionKey = "ddbpipe.archive.schema"
	SchemaVersion    = "2"
	LayoutKey        = "ddbpipe.archive.layout"
)

// Common column names, in every layout.
const (
	colTable    = "table"
	colMonth    = "month"
	colStream   = "stream"
	colSequence = "sequence_number"
	colEvent    = "event_name"
	colRecorded = "recorded_at"
	colTTL      = "ttl_delete"
	colImage    = "image"
	colReplayed = "replayed"
	colKeys     = "keys"
	colExtra    = "extra"
	colOldImage = "old_image"
)

// Which image the typed columns describe.
const (
	imageNew  = "new"
	imageOld  = "old"
	imageKeys = "keys"
)

// codec compresses every column. One value for the process: it pools its
// zstd encoders, which are costly to build (megabytes of tables each).
var codec = &zstd.Codec{Level: zstd.SpeedBetterCompression}

// pageSize: 1 MiB data pages (parquet-mr's default) compress a few percent
// better than parquet-go's default and still let readers skip pages.
const pageSize = 1 << 20

// maxRowsPerRowGroup keeps a compacted file's row groups to a size readers
// can skip through (128 Ki rows, a few MB of votes).
const maxRowsPerRowGroup = 128 << 10

func dict(n parquet.Node) parquet.Node { return parquet.Encoded(n, &parquet.RLEDictionary) }

// layoutSchema is a layout's Parquet schema, with where each column sits.
type layoutSchema struct {
	layout   archive.Layout
	schema   *parquet.Schema
	index    map[string]int // column name → leaf index
	noBounds []string
}

var schemas = func() map[string]*layoutSchema {
	m := map[string]*layoutSchema{}
	for _, l := range archive.Layouts {
		m[l.Name] = newLayoutSchema(l)
	}
	return m
}()

func newLayoutSchema(l archive.Layout) *layoutSchema {
	g := parquet.Group{
		colTable:    dict(parquet.String()),
		colMonth:    dict(parquet.String()),
		colStream:   dict(parquet.String()),
		colSequence: parquet.Encoded(parquet.String(), &parquet.DeltaByteArray),
		colEvent:    dict(parquet.String()),
		colRecorded: parquet.Encoded(parquet.Timestamp(parquet.Microsecond), &parquet.DeltaBinaryPacked),
		colTTL:      parquet.Leaf(parquet.BooleanType),
		colImage:    dict(parquet.String()),
		colReplayed: parquet.Leaf(parquet.BooleanType),
		colKeys:     parquet.Optional(parquet.String()),
		colExtra:    parquet.Optional(parquet.String()),
		colOldImage: parquet.Optional(parquet.String()),
	}
	s := &layoutSchema{layout: l, index: map[string]int{}, noBounds: []string{colKeys, colExtra, colOldImage}}
	for _, c := range l.Columns {
		if _, dup := g[c.Name]; dup {
			panic("archiveparquet: layout " + l.Name + " redefines column " + c.Name)
		}
		var n parquet.Node
		switch c.Kind {
		case archive.KindString:
			n = parquet.String()
			if c.Dict {
				n = dict(n)
			}
		case archive.KindInt:
			n = parquet.Encoded(parquet.Int(64), &parquet.DeltaBinaryPacked)
		case archive.KindTimestamp:
			// times grow along the stream and within a sorted file's runs:
			// deltas take a byte or two where plain values take eight
			n = parquet.Encoded(parquet.Timestamp(parquet.Microsecond), &parquet.DeltaBinaryPacked)
		case archive.KindBool:
			n = parquet.Leaf(parquet.BooleanType)
		case archive.KindForm:
			n = parquet.Int(32)
		}
		g[c.Name] = parquet.Optional(n)
		if !c.Filter {
			s.noBounds = append(s.noBounds, c.Name)
		}
	}
	s.schema = parquet.NewSchema("ddbpipe_archive", g)
	for i, path := range s.schema.Columns() {
		s.index[path[0]] = i
	}
	return s
}

// Schema is a layout's Parquet schema as text, for documentation and the
// Glue tables' test.
func Schema(l archive.Layout) string { return schemaOf(l).schema.String() }

// ColumnTypes are a layout's columns and their SQL types (Athena's names),
// in the file's order, as the Glue table declares them.
func ColumnTypes(l archive.Layout) [][2]string {
	s := schemaOf(l)
	out := make([][2]string, len(s.schema.Columns()))
	typed := map[string]archive.Kind{}
	for _, c := range l.Columns {
		typed[c.Name] = c.Kind
	}
	for name, i := range s.index {
		t := "string"
		switch name {
		case colRecorded:
			t = "timestamp"
		case colTTL, colReplayed:
			t = "boolean"
		default:
			if k, ok := typed[name]; ok {
				t = k.String()
			}
		}
		out[i] = [2]string{name, t}
	}
	return out
}

func schemaOf(l archive.Layout) *layoutSchema {
	if s, ok := schemas[l.Name]; ok {
		return s
	}
	return newLayoutSchema(l)
}

// encoded is one row on its way into a file.
type encoded struct {
	vals []any // the layout's typed values
	keys string
	row  parquet.Row
}

// Encode writes rows, all of one table, as one zstd-compressed Parquet file
// in the table's layout (archive.LayoutFor). Rows are written in order,
// unless every row is replayed: the file is then sorted by the layout's
// SortBy columns (and keys).
func Encode(w io.Writer, rows []archive.Row) error { return encode(w, rows, nil) }

// EncodeObject writes the archiver's object as Encode writes its rows, byte
// for byte, but splits the images its records held (o.Images) into the
// typed columns rather than read them back from the rows' JSON.
func EncodeObject(w io.Writer, o archive.Object) error {
	if len(o.Images) != len(o.Rows) {
		return fmt.Errorf("archiveparquet: object %s has %d rows and %d images", o.Key, len(o.Rows), len(o.Images))
	}
	return encode(w, o.Rows, o.Images)
}

// encode is Encode; images, when not nil, are the rows' main images.
func encode(w io.Writer, rows []archive.Row, images []archive.Item) error {
	l := archive.GenericLayout
	if len(rows) > 0 {
		l = archive.LayoutFor(rows[0].Table)
	}
	s := schemaOf(l)
	enc := make([]encoded, len(rows))
	replayed := len(rows) > 0
	for i, r := range rows {
		if r.Table != rows[0].Table {
			return fmt.Errorf("archiveparquet: rows of tables %s and %s in one file", rows[0].Table, r.Table)
		}
		var img archive.Item
		if images != nil {
			img = images[i]
		}
		e, err := s.encode(r, img)
		if err != nil {
			return fmt.Errorf("archiveparquet: row at sequence %s: %w", r.SequenceNumber, err)
		}
		enc[i] = e
		replayed = replayed && r.Replayed
	}
	opts := []parquet.WriterOption{
		s.schema,
		parquet.Compression(codec),
		parquet.PageBufferSize(pageSize),
		parquet.MaxRowsPerRowGroup(maxRowsPerRowGroup),
		parquet.CreatedBy("ddbpipe", SchemaVersion, ""),
		parquet.KeyValueMetadata(SchemaVersionKey, SchemaVersion),
		parquet.KeyValueMetadata(LayoutKey, l.Name),
	}
	for _, col := range s.noBounds {
		opts = append(opts, parquet.SkipPageBounds(col))
	}
	if replayed && len(l.SortBy) > 0 {
		s.sort(enc)
		var cols []parquet.SortingColumn
		for _, c := range l.SortBy {
			cols = append(cols, parquet.NullsFirst(parquet.Ascending(c)))
		}
		opts = append(opts, parquet.SortingWriterConfig(parquet.SortingColumns(cols...)))
	}
	pw := parquet.NewWriter(w, opts...)
	const chunk = 1024
	buf := make([]parquet.Row, 0, chunk)
	for start := 0; start < len(enc); start += chunk {
		buf = buf[:0]
		for _, e := range enc[start:min(start+chunk, len(enc))] {
			buf = append(buf, e.row)
		}
		if _, err := pw.WriteRows(buf); err != nil {
			return fmt.Errorf("archiveparquet: encode rows: %w", err)
		}
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("archiveparquet: finish file: %w", err)
	}
	return nil
}

// encode makes r's Parquet row. img is r's main image (the new image, else
// the old one, else the keys) as values; nil reads it from r's JSON.
func (s *layoutSchema) encode(r archive.Row, img archive.Item) (encoded, error) {
	main, which := r.NewImage, imageNew
	switch {
	case r.NewImage != "":
	case r.OldImage != "":
		main, which = r.OldImage, imageOld
	default:
		main, which = r.Keys, imageKeys
	}
	if img == nil {
		var err error
		if img, err = archive.ParseImage(main); err != nil {
			return encoded{}, err
		}
	}
	vals, extra := s.layout.Split(img)
	row := make(parquet.Row, len(s.index))
	set := func(name string, v parquet.Value) {
		i := s.index[name]
		row[i] = v.Level(0, 0, i)
	}
	opt := func(name string, v parquet.Value, present bool) {
		i := s.index[name]
		if !present {
			row[i] = parquet.NullValue().Level(0, 0, i)
			return
		}
		row[i] = v.Level(0, 1, i)
	}
	str := func(v string) parquet.Value { return parquet.ByteArrayValue([]byte(v)) }
	set(colTable, str(r.Table))
	set(colMonth, str(r.Month))
	set(colStream, str(r.Stream))
	set(colSequence, str(r.SequenceNumber))
	set(colEvent, str(r.EventName))
	set(colRecorded, parquet.Int64Value(r.ApproximateCreationTime.UnixMicro()))
	set(colTTL, parquet.BooleanValue(r.TTLDelete))
	set(colImage, str(which))
	set(colReplayed, parquet.BooleanValue(r.Replayed))
	derived, ok := s.layout.KeysOf(img)
	opt(colKeys, str(r.Keys), !ok || derived != r.Keys)
	extraJSON, err := archive.ImageJSON(extra)
	if err != nil {
		return encoded{}, err
	}
	opt(colExtra, str(extraJSON), extra != nil)
	opt(colOldImage, str(r.OldImage), which == imageNew && r.OldImage != "")
	for i, c := range s.layout.Columns {
		var v parquet.Value
		switch x := vals[i].(type) {
		case string:
			v = str(x)
		case int64:
			v = parquet.Int64Value(x)
		case time.Time:
			v = parquet.Int64Value(x.UnixMicro())
		case bool:
			v = parquet.BooleanValue(x)
		case int32:
			v = parquet.Int32Value(x)
		}
		opt(c.Name, v, vals[i] != nil)
	}
	return encoded{vals: vals, keys: r.Keys, row: row}, nil
}

// sort orders replayed rows by the layout's SortBy columns (nulls first),
// then by keys.
func (s *layoutSchema) sort(enc []encoded) {
	var by []int
	for _, name := range s.layout.SortBy {
		for i, c := range s.layout.Columns {
			if c.Name == name {
				by = append(by, i)
			}
		}
	}
	sort.SliceStable(enc, func(a, b int) bool {
		for _, i := range by {
			if c := compareValues(enc[a].vals[i], enc[b].vals[i]); c != 0 {
				return c < 0
			}
		}
		return enc[a].keys < enc[b].keys
	})
}

func compareValues(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string))
	case int64:
		return cmpOrdered(x, b.(int64))
	case int32:
		return cmpOrdered(x, b.(int32))
	case time.Time:
		return x.Compare(b.(time.Time))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	}
	return 0
}

func cmpOrdered[T int32 | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Marshal is Encode into memory.
func Marshal(rows []archive.Row) ([]byte, error) {
	var b bytes.Buffer
	if err := Encode(&b, rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// MarshalObject is EncodeObject into memory.
func MarshalObject(o archive.Object) ([]byte, error) {
	var b bytes.Buffer
	if err := EncodeObject(&b, o); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads every row of an archive file: version 2 in the layout its
// metadata names (its columns checked against the layout's: ErrSchema
// otherwise), or a version-1 file.
func Decode(r io.ReaderAt, size int64) ([]archive.Row, error) {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("archiveparquet: open file: %w", err)
	}
	version, _ := f.Lookup(SchemaVersionKey)
	if version == "1" || (version == "" && parquet.EqualNodes(f.Schema(), v1Schema)) {
		if !parquet.EqualNodes(f.Schema(), v1Schema) {
			return nil, fmt.Errorf("%w: version-1 file with columns %s", ErrSchema, strings.Join(columnNames(f.Schema()), ", "))
		}
		return decodeV1(f)
	}
	name, _ := f.Lookup(LayoutKey)
	l, ok := archive.LayoutNamed(name)
	if version != SchemaVersion || !ok {
		return nil, fmt.Errorf("%w: schema version %q, layout %q", ErrSchema, version, name)
	}
	s := schemaOf(l)
	if !parquet.EqualNodes(f.Schema(), s.schema) {
		return nil, fmt.Errorf("%w: columns %s are not the %s layout's", ErrSchema, strings.Join(columnNames(f.Schema()), ", "), l.Name)
	}
	return s.decodeAll(f)
}

func (s *layoutSchema) decodeAll(f *parquet.File) (rows []archive.Row, err error) {
	pr := parquet.NewReader(f)
	defer func() {
		if cerr := pr.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("archiveparquet: close reader: %w", cerr)
		}
	}()
	rows = make([]archive.Row, 0, f.NumRows())
	buf := make([]parquet.Row, 1024)
	for {
		n, rerr := pr.ReadRows(buf)
		for _, pr := range buf[:n] {
			row, err := s.decode(pr)
			if err != nil {
				return nil, fmt.Errorf("archiveparquet: row %d: %w", len(rows), err)
			}
			rows = append(rows, row)
		}
		if errors.Is(rerr, io.EOF) {
			return rows, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("archiveparquet: read rows: %w", rerr)
		}
	}
}

func (s *layoutSchema) decode(pr parquet.Row) (archive.Row, error) {
	get := func(name string) parquet.Value { return pr[s.index[name]] }
	str := func(name string) string { return string(get(name).ByteArray()) }
	opt := func(name string) (string, bool) {
		v := get(name)
		return string(v.ByteArray()), !v.IsNull()
	}
	r := archive.Row{
		Table: str(colTable), Month: str(colMonth), Stream: str(colStream), SequenceNumber: str(colSequence),
		EventName: str(colEvent), ApproximateCreationTime: time.UnixMicro(get(colRecorded).Int64()).UTC(),
		TTLDelete: get(colTTL).Boolean(), Replayed: get(colReplayed).Boolean(),
	}
	vals := make([]any, len(s.layout.Columns))
	for i, c := range s.layout.Columns {
		v := get(c.Name)
		if v.IsNull() {
			continue
		}
		switch c.Kind {
		case archive.KindString:
			vals[i] = string(v.ByteArray())
		case archive.KindInt:
			vals[i] = v.Int64()
		case archive.KindTimestamp:
			vals[i] = time.UnixMicro(v.Int64()).UTC()
		case archive.KindBool:
			vals[i] = v.Boolean()
		case archive.KindForm:
			vals[i] = v.Int32()
		}
	}
	var extra archive.Item
	if e, ok := opt(colExtra); ok {
		var err error
		if extra, err = archive.ParseImage(e); err != nil {
			return r, err
		}
	}
	img, err := s.layout.Join(vals, extra)
	if err != nil {
		return r, err
	}
	main, err := archive.ImageJSON(img)
	if err != nil {
		return r, err
	}
	if k, ok := opt(colKeys); ok {
		r.Keys = k
	} else if r.Keys, ok = s.layout.KeysOf(img); !ok {
		return r, fmt.Errorf("%w: no keys column and the image lacks the %s layout's keys", ErrSchema, s.layout.Name)
	}
	switch which := str(colImage); which {
	case imageNew:
		r.NewImage = main
		r.OldImage, _ = opt(colOldImage)
	case imageOld:
		r.OldImage = main
	case imageKeys:
	default:
		return r, fmt.Errorf("%w: image %q", ErrSchema, which)
	}
	return r, nil
}

// Unmarshal is Decode from memory.
func Unmarshal(data []byte) ([]archive.Row, error) {
	return Decode(bytes.NewReader(data), int64(len(data)))
}

func columnNames(s *parquet.Schema) []string {
	var names []string
	for _, f := range s.Fields() {
		names = append(names, f.Name())
	}
	return names
}
