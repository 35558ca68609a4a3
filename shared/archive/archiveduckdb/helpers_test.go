package archiveduckdb_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
)

// dirPutter is a bucket in a local folder: what the archiver writes lands
// at dir/<key>, where Open reads it.
type dirPutter struct{ dir string }

var _ archives3.PutObjectAPI = dirPutter{}

func (d dirPutter) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	path := filepath.Join(d.dir, filepath.FromSlash(aws.ToString(in.Key)))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, in.Body); err != nil {
		return nil, err
	}
	return &s3.PutObjectOutput{}, os.WriteFile(path, b.Bytes(), 0o644)
}

// vote describes one vote ledger record.
type vote struct {
	table, poll, option, voter string
	at                         time.Time
	id                         string // the vote id
	onePerVoter                bool   // the poll takes one vote per voter: sk is the voter id
}

var polls = []string{"color", "best-pet", "lunch"}

// onePerVoterPoll takes one vote per voter (sk <voterId>).
const onePerVoterPoll = "mayor"

// votes makes n votes in table (a monthly ledger), spread over polls,
// options and voters, one every 97 minutes from start; and then one vote
// of each of the first n/10 voters in the one-vote-per-voter poll.
func votes(table string, start time.Time, n int) []vote {
	out := make([]vote, n, n+n/10)
	for i := range out {
		out[i] = vote{
			table: table, poll: polls[i%3], option: []string{"red", "green", "blue", "cat"}[(i*7)%4],
			voter: fmt.Sprintf("voter-%d", (i*31)%50), at: start.Add(time.Duration(i) * 97 * time.Minute),
			id: fmt.Sprintf("%s-vote-%06d", table[len(table)-7:], i),
		}
	}
	for j := range n / 10 {
		out = append(out, vote{
			table: table, poll: onePerVoterPoll, option: []string{"ada", "bob"}[j%3/2],
			voter: fmt.Sprintf("voter-%d", j), at: start.Add(time.Duration(j)*131*time.Minute + 17*time.Second),
			id: fmt.Sprintf("%s-vote-p%06d", table[len(table)-7:], j), onePerVoter: true,
		})
	}
	return out
}

// record is the stream record of the i-th vote of its table, as
// shared/votes/votesddb writes the ledger item.
func (v vote) record(i int) events.DynamoDBEventRecord {
	s := events.NewStringAttribute
	pk := fmt.Sprintf("%s#%d", v.poll, i%16)
	sk := v.voter + "#" + v.id
	if v.onePerVoter {
		sk = v.voter
	}
	return events.DynamoDBEventRecord{
		AWSRegion: "us-east-1", EventSource: "aws:dynamodb", EventName: "INSERT",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/" + v.table + "/stream/2026-11-01T00:00:00.000",
		EventID:        fmt.Sprintf("%s-%d", v.table, i),
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: v.at.Add(2 * time.Second)},
			SequenceNumber:              fmt.Sprintf("%d", 100000000000000000+i*3),
			StreamViewType:              "NEW_AND_OLD_IMAGES",
			Keys:                        map[string]events.DynamoDBAttributeValue{"pk": s(pk), "sk": s(sk)},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"pk": s(pk), "sk": s(sk), "pollId": s(v.poll), "optionId": s(v.option), "voterId": s(v.voter),
				"voteId": s(v.id), "castAt": s(v.at.UTC().Format(time.RFC3339Nano)),
				"countedAt": s(v.at.Add(2 * time.Second).UTC().Format(time.RFC3339Nano)),
			},
		},
	}
}

// mustArchive runs the archiver over the votes in batches of batch records,
// writing through put.
func mustArchive(tb testing.TB, put archives3.PutObjectAPI, bucket string, vs []vote, batch int) {
	tb.Helper()
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: put, Bucket: bucket}}
	for start := 0; start < len(vs); start += batch {
		var recs []events.DynamoDBEventRecord
		for i := start; i < min(start+batch, len(vs)); i++ {
			recs = append(recs, vs[i].record(i))
		}
		if res := a.Archive(context.Background(), recs); res.Err != nil {
			tb.Fatalf("archive batch at %d: %v", start, res.Err)
		}
	}
}

// objectChange is a stream record of the objects table.
func objectChange(i int, name, key, sk string, at time.Time, newImage, oldImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	s := events.NewStringAttribute
	return events.DynamoDBEventRecord{
		EventName:      name,
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/ddbpipe-objects/stream/2026-10-01T00:00:00.000",
		EventID:        fmt.Sprintf("obj-%d", i),
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: at},
			SequenceNumber:              fmt.Sprintf("%d", 900+i),
			Keys:                        map[string]events.DynamoDBAttributeValue{"pk": s(key), "sk": s(sk)},
			NewImage:                    newImage,
			OldImage:                    oldImage,
		},
	}
}
