package archivetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// RandomValue is a random attribute value of any DynamoDB type: S (with
// escapes and non-ASCII), N (up to 38 digits, signs, fractions, exponents),
// B (empty too), BOOL, NULL, the three sets (distinct members), and lists
// and maps nested up to depth levels.
func RandomValue(r *rand.Rand, depth int) any {
	n := 9
	if depth > 0 {
		n = 11
	}
	switch r.IntN(n) {
	case 0:
		return randomString(r)
	case 1:
		return randomNumber(r)
	case 2:
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	case 3:
		return r.IntN(2) == 0
	case 4:
		return nil
	case 5:
		set := map[string]bool{}
		for range 1 + r.IntN(4) {
			set[randomString(r)] = true
		}
		var ss []string
		for s := range set {
			ss = append(ss, s)
		}
		return ss
	case 6:
		set := map[string]bool{}
		var ns []archive.Number
		for range 1 + r.IntN(4) {
			if n := randomNumber(r); !set[string(n)] {
				set[string(n)] = true
				ns = append(ns, n)
			}
		}
		return ns
	case 7:
		set := map[string]bool{}
		var bs [][]byte
		for range 1 + r.IntN(4) {
			b := []byte{byte(r.IntN(256)), byte(r.IntN(4))}[:1+r.IntN(2)]
			if !set[string(b)] {
				set[string(b)] = true
				bs = append(bs, b)
			}
		}
		return bs
	case 8:
		return randomString(r) // strings twice as likely
	case 9:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = RandomValue(r, depth-1)
		}
		return l
	default:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randomString(r)] = RandomValue(r, depth-1)
		}
		return m
	}
}

var pieces = []string{"a", "poll", "#", "é", "✓", "\"", "\\", "\n", "\t", "\x01", "<&>", " ", "𝄞", "0", "Z"}

func randomString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randomNumber(r *rand.Rand) archive.Number {
	digits := func(n int) string {
		var b strings.Builder
		b.WriteByte(byte('1' + r.IntN(9)))
		for range n - 1 {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return b.String()
	}
	switch r.IntN(6) {
	case 0:
		return archive.Number(fmt.Sprint(r.Int64N(1000) - 500))
	case 1:
		return archive.Number(digits(38)) // 38 significant digits
	case 2:
		return archive.Number("-" + digits(20) + "." + digits(18))
	case 3:
		return archive.Number(digits(1) + "E+" + fmt.Sprint(r.IntN(125)))
	case 4:
		return archive.Number("0." + digits(5))
	default:
		return archive.Number(fmt.Sprint(r.Int64()))
	}
}

// RandomItem is a random image: the keys pk and sk, and up to n attributes
// of any type, each named for its index.
func RandomItem(r *rand.Rand, n int) archive.Item {
	img := archive.Item{"pk": randomString(r) + "p", "sk": randomString(r) + "s"}
	for i := range r.IntN(n + 1) {
		img[fmt.Sprintf("a%d", i)] = RandomValue(r, 3)
	}
	return img
}

// RandomLedgerItem is a vote ledger item as votesddb writes it, or, one
// time in three per attribute, with a value the ledger layout's typed
// columns cannot hold exactly (a number for a string, a time with
// nanoseconds or an offset, a sort key of neither form, a missing
// attribute, an extra attribute of any type), to prove those stay in extra.
func RandomLedgerItem(r *rand.Rand) archive.Item {
	odd := func() bool { return r.IntN(3) == 0 }
	poll, voter, vote := fmt.Sprintf("poll-%d", r.IntN(5)), fmt.Sprintf("voter-%d", r.IntN(1000)), fmt.Sprintf("v%08x", r.Uint32())
	at := time.Date(2026, 11, 1+r.IntN(30), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e6)*1000, time.UTC)
	item := ledger.Item{PK: fmt.Sprintf("%s#%d", poll, r.IntN(10)), SK: voter + "#" + vote,
		PollID: poll, OptionID: fmt.Sprintf("opt-%d", r.IntN(4)), VoterID: voter, VoteID: vote,
		CastAt: at, CountedAt: at.Add(time.Second)}
	img := archive.Item{}
	for name, v := range item.Attributes() {
		img[name] = v
	}
	if r.IntN(2) == 0 {
		img[ledger.AttrSK] = voter
	}
	if odd() {
		img[ledger.AttrCastAt] = at.Add(7 * time.Nanosecond).Format(time.RFC3339Nano)
	}
	if odd() {
		img[ledger.AttrCountedAt] = at.In(time.FixedZone("X", 3600)).Format(time.RFC3339Nano)
	}
	if odd() {
		img[ledger.AttrOptionID] = randomNumber(r)
	}
	if odd() {
		img[ledger.AttrSK] = "other#" + vote
	}
	if odd() {
		delete(img, ledger.AttrVoteID)
	}
	if odd() {
		img["note"] = RandomValue(r, 3)
	}
	return img
}

// LambdaImage is img as a Lambda stream event carries it: its DynamoDB
// JSON (archive.ImageJSON) decoded as aws-lambda-go decodes an event. A nil
// image gives nil (an absent image).
func LambdaImage(tb testing.TB, img archive.Item) map[string]events.DynamoDBAttributeValue {
	tb.Helper()
	if img == nil {
		return nil
	}
	j, err := archive.ImageJSON(img)
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal([]byte(j), &m); err != nil {
		tb.Fatalf("%s: %v", j, err)
	}
	return m
}

// RandomObjectsItem is an objects table item as objectsddb writes it, or,
// one time in three per attribute, with a value the objects layout's typed
// columns cannot hold exactly (a version of "07", a size beyond 64 bits, a
// time with nanoseconds, a string for a boolean).
func RandomObjectsItem(r *rand.Rand) archive.Item {
	odd := func() bool { return r.IntN(3) == 0 }
	version := r.IntN(20)
	created := time.Date(2026, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), 0, 0, r.IntN(1e6)*1000, time.UTC)
	img := archive.Item{
		"pk": fmt.Sprintf("docs/%s%d.txt", randomString(r), r.IntN(50)), "sk": fmt.Sprintf("v%d", version),
		"version": archive.Number(fmt.Sprint(version)), "kind": []string{"inline", "compressed", "chunked", "s3"}[r.IntN(4)],
		"size": archive.Number(fmt.Sprint(r.Int64N(1 << 40))), "sha256": fmt.Sprintf("%064x", r.Uint64()),
		"contentType": "text/plain", "codec": "identity", "writeId": fmt.Sprintf("w%08x", r.Uint32()),
		"createdAt": created.Format(time.RFC3339Nano), "deleted": r.IntN(4) == 0, "data": []byte(randomString(r)),
	}
	if odd() {
		img["version"] = archive.Number(fmt.Sprintf("0%d", version))
	}
	if odd() {
		img["size"] = archive.Number("99999999999999999999")
	}
	if odd() {
		img["createdAt"] = created.Add(3 * time.Nanosecond).Format(time.RFC3339Nano)
	}
	if odd() {
		img["deleted"] = "no"
	}
	if odd() {
		img["meta"] = RandomValue(r, 3)
	}
	return img
}

// RandomRecord is a random stream record of table, as Lambda delivers it,
// at sequence number Seq(i): an INSERT, a MODIFY with or without its old
// image, or a REMOVE with its old image (a TTL delete at times) or its keys
// alone. Its image suits the table (RandomLedgerItem for a ledger,
// RandomObjectsItem for an objects table, RandomItem for another) three
// times in four, and is RandomItem otherwise.
func RandomRecord(tb testing.TB, r *rand.Rand, table string, i int) events.DynamoDBEventRecord {
	tb.Helper()
	img := RandomItem(r, 8)
	if r.IntN(4) > 0 {
		switch archive.LayoutFor(archive.PartitionOf(table, voteTime).Table).Name {
		case archive.LedgerLayout.Name:
			img = RandomLedgerItem(r)
		case archive.ObjectsLayout.Name:
			img = RandomObjectsItem(r)
		}
	}
	change := events.DynamoDBStreamRecord{
		ApproximateCreationDateTime: events.SecondsEpochTime{Time: voteTime.Add(time.Duration(i) * time.Minute)},
		SequenceNumber:              Seq(i),
		StreamViewType:              "NEW_AND_OLD_IMAGES",
		Keys:                        LambdaImage(tb, archive.Item{"pk": img["pk"], "sk": img["sk"]}),
	}
	rec := events.DynamoDBEventRecord{
		AWSRegion: "us-east-1", EventSource: "aws:dynamodb", EventVersion: "1.1",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-01-01T00:00:00.000",
		EventID:        fmt.Sprintf("%016x", r.Uint64()),
	}
	switch r.IntN(5) {
	case 0:
		rec.EventName, change.NewImage = archive.EventInsert, LambdaImage(tb, img)
	case 1:
		rec.EventName, change.NewImage, change.OldImage = archive.EventModify, LambdaImage(tb, img), LambdaImage(tb, RandomItem(r, 3))
	case 2:
		rec.EventName, change.NewImage = archive.EventModify, LambdaImage(tb, img)
	case 3:
		rec.EventName, change.OldImage = archive.EventRemove, LambdaImage(tb, img)
		if r.IntN(2) == 0 {
			rec.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
		}
	default:
		rec.EventName = archive.EventRemove // keys only
	}
	rec.Change = change
	return rec
}
