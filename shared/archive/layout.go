package archive

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// Kind is the SQL type of a typed column.
type Kind int

// Column kinds. Each holds an attribute only when the value converts back to
// the attribute exactly; any other value of the attribute stays in extra.
const (
	// KindString: an S attribute, as is.
	KindString Kind = iota
	// KindInt: an N attribute that is a 64-bit integer written canonically
	// ("42", not "42.0", "042" or "4.2E1").
	KindInt
	// KindTimestamp: an S attribute holding an RFC 3339 UTC time ("Z") as
	// Go's time.RFC3339Nano writes it, to the microsecond at most; a UTC
	// timestamp column in SQL.
	KindTimestamp
	// KindBool: a BOOL attribute.
	KindBool
	// KindForm: an S attribute built from other attributes by one of the
	// column's Forms; the column holds the form's number (1-based).
	KindForm
)

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindInt:
		return "bigint"
	case KindTimestamp:
		return "timestamp"
	case KindBool:
		return "boolean"
	case KindForm:
		return "int"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Column is a typed column of a Layout: one attribute of the item.
type Column struct {
	Name string // the SQL column, snake_case
	Attr string // the attribute it holds
	Kind Kind
	// Forms (KindForm only) are templates of the attribute's value, with
	// {name} standing for another attribute's string value:
	// "{voterId}#{voteId}".
	Forms []string
	// Dict: few distinct values (dictionary-encoded).
	Dict bool
	// Filter: readers filter on it (its pages keep their min and max, so a
	// reader skips the pages a predicate rules out). Random ids and
	// checksums, filtered on by nobody, leave them out.
	Filter bool
	// Comment describes the column in the Glue table.
	Comment string
}

// Layout is how one source table's rows are stored: typed columns for the
// attributes its items are known to have, the rest in extra. A table without
// a declared layout gets GenericLayout.
type Layout struct {
	Name string // "ledger", "objects", "generic": recorded in each file
	// Keys are the table's key attribute names. A row's keys are then the
	// main image's key attributes, and not stored again; nil (GenericLayout)
	// stores them in the keys column.
	Keys    []string
	Columns []Column
	// SortBy are the columns a replayed (compacted) file is sorted by: the
	// columns analysts filter on, so a sorted file's pages each hold a
	// narrow range of them.
	SortBy []string
}

// LedgerLayout is the vote ledger's (<stack>-votes-YYYY-MM) layout. Its
// items are written by shared/votes/votesddb, with the attributes
// shared/ledger names: pk <pollId>#<suffix>, sk <voterId>#<voteId> (or
// <voterId> for one-vote-per-voter polls).
var LedgerLayout = Layout{
	Name: "ledger",
	Keys: []string{ledger.AttrPK, ledger.AttrSK},
	Columns: []Column{
		{Name: "poll_id", Attr: ledger.AttrPollID, Kind: KindString, Dict: true, Filter: true},
		{Name: "option_id", Attr: ledger.AttrOptionID, Kind: KindString, Dict: true, Filter: true},
		{Name: "voter_id", Attr: ledger.AttrVoterID, Kind: KindString, Filter: true},
		{Name: "vote_id", Attr: ledger.AttrVoteID, Kind: KindString},
		{Name: "cast_at", Attr: ledger.AttrCastAt, Kind: KindTimestamp, Filter: true, Comment: "UTC; when the voter voted"},
		{Name: "counted_at", Attr: ledger.AttrCountedAt, Kind: KindTimestamp, Comment: "UTC; when the counter added the vote"},
		{Name: "pk", Attr: ledger.AttrPK, Kind: KindString, Dict: true, Comment: "the ledger partition key, <poll_id>#<suffix>"},
		{Name: "sk_form", Attr: ledger.AttrSK, Kind: KindForm,
			Forms:   []string{"{" + ledger.AttrVoterID + "}#{" + ledger.AttrVoteID + "}", "{" + ledger.AttrVoterID + "}"},
			Comment: "the sort key's form: 1 = <voter_id>#<vote_id>, 2 = <voter_id> (one vote per voter)"},
	},
	SortBy: []string{"poll_id", "option_id", "cast_at"},
}

// ObjectsLayout is the objects table's layout (shared/objects/objectsddb):
// pk the object key, sk the item (the head "v0", a version, a chunk, an
// upload, a reference).
var ObjectsLayout = Layout{
	Name: "objects",
	Keys: []string{"pk", "sk"},
	Columns: []Column{
		{Name: "object_key", Attr: "pk", Kind: KindString, Filter: true},
		{Name: "sort_key", Attr: "sk", Kind: KindString, Filter: true, Comment: "v0 (the head), a version, a chunk, an upload"},
		{Name: "version", Attr: "version", Kind: KindInt},
		{Name: "placement", Attr: "kind", Kind: KindString, Dict: true, Filter: true, Comment: "inline, compressed, chunked or s3"},
		{Name: "size", Attr: "size", Kind: KindInt},
		{Name: "sha256", Attr: "sha256", Kind: KindString},
		{Name: "content_type", Attr: "contentType", Kind: KindString, Dict: true},
		{Name: "codec", Attr: "codec", Kind: KindString, Dict: true},
		{Name: "write_id", Attr: "writeId", Kind: KindString},
		{Name: "created_at", Attr: "createdAt", Kind: KindTimestamp, Filter: true, Comment: "UTC"},
		{Name: "deleted", Attr: "deleted", Kind: KindBool},
	},
	SortBy: []string{"object_key", "sort_key"},
}

// GenericLayout is the layout of a table without a declared one: its keys
// and its whole image in extra, type-tagged.
var GenericLayout = Layout{Name: "generic"}

// Layouts are the declared layouts, by name.
var Layouts = []Layout{LedgerLayout, ObjectsLayout, GenericLayout}

// LayoutNamed finds a layout by the name a file records.
func LayoutNamed(name string) (Layout, bool) {
	for _, l := range Layouts {
		if l.Name == name {
			return l, true
		}
	}
	return Layout{}, false
}

// LayoutFor gives a table's layout from its base name (see PartitionOf), by
// the names the stack gives its tables: "<stack>-votes" (the monthly
// ledgers) is the ledger, "<stack>-objects" the objects table; any other
// table mapped to the archiver is generic.
func LayoutFor(base string) Layout {
	switch {
	case strings.HasSuffix(base, "-votes"):
		return LedgerLayout
	case strings.HasSuffix(base, "-objects"):
		return ObjectsLayout
	}
	return GenericLayout
}

// Split divides an image into the layout's typed values (one per column, nil
// where the column does not hold the attribute) and extra: the attributes no
// column holds exactly (nil when there are none). Join(Split(img)) == img.
func (l Layout) Split(img Item) (vals []any, extra Item) {
	vals = make([]any, len(l.Columns))
	taken := map[string]bool{}
	for i, c := range l.Columns {
		v, ok := img[c.Attr]
		if !ok {
			continue
		}
		if tv, ok := c.typed(v, img); ok {
			vals[i] = tv
			taken[c.Attr] = true
		}
	}
	for name, v := range img {
		if !taken[name] {
			if extra == nil {
				extra = Item{}
			}
			extra[name] = v
		}
	}
	return vals, extra
}

// Join is Split's inverse: the image that typed values and extra hold.
func (l Layout) Join(vals []any, extra Item) (Item, error) {
	img := make(Item, len(extra)+len(l.Columns))
	for k, v := range extra {
		img[k] = v
	}
	var forms []int
	for i, c := range l.Columns {
		if i >= len(vals) || vals[i] == nil {
			continue
		}
		switch c.Kind {
		case KindString:
			img[c.Attr] = vals[i].(string)
		case KindInt:
			img[c.Attr] = Number(strconv.FormatInt(vals[i].(int64), 10))
		case KindTimestamp:
			img[c.Attr] = vals[i].(time.Time).UTC().Format(time.RFC3339Nano)
		case KindBool:
			img[c.Attr] = vals[i].(bool)
		case KindForm:
			forms = append(forms, i)
		}
	}
	for _, i := range forms { // after the attributes they are built from
		c, n := l.Columns[i], vals[i].(int32)
		if n < 1 || int(n) > len(c.Forms) {
			return nil, fmt.Errorf("%w: column %s holds form %d of %d", ErrUnsupportedValue, c.Name, n, len(c.Forms))
		}
		s, ok := expand(c.Forms[n-1], img)
		if !ok {
			return nil, fmt.Errorf("%w: column %s: form %q lacks an attribute", ErrUnsupportedValue, c.Name, c.Forms[n-1])
		}
		img[c.Attr] = s
	}
	return img, nil
}

// typed converts an attribute value to the column's, when it converts back
// exactly.
func (c Column) typed(v any, img Item) (any, bool) {
	switch c.Kind {
	case KindString:
		s, ok := v.(string)
		return s, ok
	case KindInt:
		n, ok := v.(Number)
		if !ok {
			return nil, false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || strconv.FormatInt(i, 10) != string(n) {
			return nil, false
		}
		return i, true
	case KindTimestamp:
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || t.Location() != time.UTC || t.Year() < 1 || t.Year() > 9999 ||
			!t.Equal(t.Truncate(time.Microsecond)) || t.Format(time.RFC3339Nano) != s {
			return nil, false
		}
		return t, true
	case KindBool:
		b, ok := v.(bool)
		return b, ok
	case KindForm:
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		for i, f := range c.Forms {
			if got, ok := expand(f, img); ok && got == s {
				return int32(i + 1), true
			}
		}
	}
	return nil, false
}

// expand fills a form's {name} references with the image's string
// attributes; false when one is absent or not a string.
func expand(form string, img Item) (string, bool) {
	var b strings.Builder
	for {
		open := strings.IndexByte(form, '{')
		if open < 0 {
			b.WriteString(form)
			return b.String(), true
		}
		end := strings.IndexByte(form[open:], '}')
		if end < 0 {
			return "", false
		}
		s, ok := img[form[open+1:open+end]].(string)
		if !ok {
			return "", false
		}
		b.WriteString(form[:open])
		b.WriteString(s)
		form = form[open+end+1:]
	}
}

// KeysOf is the keys a layout derives from a row's main image (the new
// image, else the old one), as ImageJSON encodes them; false when the
// layout declares no keys or the image lacks one.
func (l Layout) KeysOf(img Item) (string, bool) {
	if len(l.Keys) == 0 || img == nil {
		return "", false
	}
	s, err := KeyJSON(img, l.Keys...)
	return s, err == nil
}
