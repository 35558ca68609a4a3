// Package archivetest holds the archive flow's test fixtures: vote ledger
// stream records as Lambda delivers them, and an in-memory S3 bucket with
// real behaviour for the archive's S3 adapter. Only tests import it.
package archivetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// MemS3 is an in-memory bucket with real behaviour (a put replaces, a get
// of a missing key fails) and an optional failure hook.
type MemS3 struct {
	mu      sync.Mutex
	objects map[string][]byte
	meta    map[string]map[string]string
	puts    int
	// FailPut, when set, is asked before each put; an error fails it.
	FailPut func(key string) error
}

var (
	_ archives3.PutObjectAPI   = (*MemS3)(nil)
	_ archives3.GetObjectAPI   = (*MemS3)(nil)
	_ archives3.ListObjectsAPI = (*MemS3)(nil)
)

// NewMemS3 returns an empty bucket.
func NewMemS3() *MemS3 {
	return &MemS3{objects: map[string][]byte{}, meta: map[string]map[string]string{}}
}

// Meta returns the metadata the object at key was put with.
func (m *MemS3) Meta(key string) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta[key]
}

func (m *MemS3) PutObject(ctx context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.FailPut != nil {
		if err := m.FailPut(aws.ToString(in.Key)); err != nil {
			return nil, err
		}
	}
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	m.objects[aws.ToString(in.Key)] = b
	m.meta[aws.ToString(in.Key)] = in.Metadata
	return &s3.PutObjectOutput{}, nil
}

func (m *MemS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[aws.ToString(in.Key)]
	if !ok {
		return nil, &s3types.NoSuchKey{Message: aws.String(aws.ToString(in.Key))}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(b)), ContentLength: aws.Int64(int64(len(b)))}, nil
}

func (m *MemS3) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &s3.ListObjectsV2Output{}
	for _, k := range m.keysLocked() {
		if strings.HasPrefix(k, aws.ToString(in.Prefix)) {
			out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k), Size: aws.Int64(int64(len(m.objects[k])))})
		}
	}
	return out, nil
}

// Keys lists the objects, sorted.
func (m *MemS3) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keysLocked()
}

func (m *MemS3) keysLocked() []string {
	keys := make([]string, 0, len(m.objects))
	for k := range m.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// MustLoadEvent reads a Lambda DynamoDB stream event from a JSON file.
func MustLoadEvent(tb testing.TB, path string) events.DynamoDBEvent {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return ev
}

// The vote ledger table the fixtures' records come from, and its stream.
const (
	LedgerTable = "ddbpipe-votes-2026-11"
	LedgerARN   = "arn:aws:dynamodb:us-east-1:000000000000:table/" + LedgerTable + "/stream/2026-11-01T00:00:00.000"
)

var voteTime = time.Date(2026, 11, 14, 9, 30, 0, 0, time.UTC)

// VoteRecord is the stream record of the i-th vote ledger item, shaped as
// votesddb writes it: pk <poll>#<hash mod 16>, sk <voter>#<voteId>.
func VoteRecord(i int) events.DynamoDBEventRecord {
	poll := []string{"color", "best-pet", "lunch"}[i%3]
	option := []string{"red", "green", "blue", "cat", "dog"}[(i*7)%5]
	voter := fmt.Sprintf("voter-%d", (i*7919)%5000)
	rnd := rand.New(rand.NewPCG(uint64(i), 42)) // random-looking ids, the same on every run
	voteID := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rnd.Uint32(), rnd.IntN(1<<16), rnd.IntN(1<<12), rnd.IntN(1<<12), rnd.Uint64()&(1<<48-1))
	pk := fmt.Sprintf("%s#%d", poll, (i*13)%16)
	sk := voter + "#" + voteID
	cast := voteTime.Add(time.Duration(i) * 1700 * time.Millisecond)
	item := ledger.Item{PK: pk, SK: sk, VoteID: voteID, PollID: poll, OptionID: option, VoterID: voter, CastAt: cast, CountedAt: cast.Add(2 * time.Second)}
	s := events.NewStringAttribute
	return events.DynamoDBEventRecord{
		AWSRegion: "us-east-1", EventSource: "aws:dynamodb", EventVersion: "1.1", EventSourceArn: LedgerARN,
		EventID: fmt.Sprintf("%016x%016x", rnd.Uint64(), rnd.Uint64()), EventName: "INSERT",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: cast.Add(40 * time.Millisecond).Truncate(time.Second)},
			SequenceNumber:              Seq(i),
			SizeBytes:                   180,
			StreamViewType:              "NEW_AND_OLD_IMAGES",
			Keys:                        map[string]events.DynamoDBAttributeValue{ledger.AttrPK: s(pk), ledger.AttrSK: s(sk)},
			NewImage:                    LedgerImage(item),
		},
	}
}

// LedgerImage is a ledger item's stream image.
func LedgerImage(it ledger.Item) map[string]events.DynamoDBAttributeValue {
	attrs := it.Attributes()
	img := make(map[string]events.DynamoDBAttributeValue, len(attrs))
	for name, v := range attrs {
		img[name] = events.NewStringAttribute(v)
	}
	return img
}

// Seq is the i-th vote's sequence number: 28 digits, growing by 3.
func Seq(i int) string { return fmt.Sprintf("44215845000000000%011d", 17450439091+3*i) }

// VoteBatch is the stream records of votes from to from+n-1.
func VoteBatch(from, n int) []events.DynamoDBEventRecord {
	recs := make([]events.DynamoDBEventRecord, n)
	for i := range recs {
		recs[i] = VoteRecord(from + i)
	}
	return recs
}
