package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// streamTable creates a table with a stream through endpoint and returns
// its stream ARN.
func streamTable(t *testing.T, db *dynamodb.Client, name string) string {
	t.Helper()
	out, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange},
		},
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeKeysOnly},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return aws.ToString(out.TableDescription.LatestStreamArn)
}

// shardedStream starts a proxy WithStreamShards(s) in front of DynamoDB
// Local and creates a stream-enabled table named prefix and a unique
// suffix through it, deleted when t ends (the servers are shared).
func shardedStream(t *testing.T, s StreamShards, prefix string) (db *dynamodb.Client, st *dynamodbstreams.Client, table, arn string) {
	t.Helper()
	_, endpoint := MustStart(t, DynamoDB, localUpstream(t, "AWS_ENDPOINT_URL_DYNAMODB"), WithStreamShards(s))
	db, st = dynamoClients(t, endpoint)
	table = uniqueName(prefix)
	arn = streamTable(t, db, table)
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return db, st, table, arn
}

func dynamoClients(t *testing.T, endpoint string) (*dynamodb.Client, *dynamodbstreams.Client) {
	creds, region := localConfig(t)
	db := dynamodb.New(dynamodb.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: creds, Retryer: connectionRetryer()})
	st := dynamodbstreams.New(dynamodbstreams.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: creds, Retryer: connectionRetryer()})
	return db, st
}

// connectionRetryer retries what the SDK's standard retryer retries for a
// broken connection, and no error of the API's: the tests read those. On a
// loaded machine a keep-alive connection to the proxy can be reset as an
// answer arrives ("use of closed network connection" while reading a 200's
// body, aws-sdk-go-v2#2737), which every client of the product retries.
func connectionRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
	})
}

func key(pk, sk string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}}
}

// readAll reads every shard of a stream as Lambda does, parents before
// children, until every shard it lists is closed and read; it returns the
// records of each shard in order and the shards.
func readAll(t *testing.T, st *dynamodbstreams.Client, arn string, until func(n int) bool) (map[string][]streamtypes.Record, []streamtypes.Shard) {
	t.Helper()
	ctx := t.Context()
	got := map[string][]streamtypes.Record{}
	done := map[string]bool{}
	iters := map[string]*string{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		shards := out.StreamDescription.Shards
		n := 0
		for _, s := range shards {
			id := aws.ToString(s.ShardId)
			if done[id] || s.ParentShardId != nil && !done[aws.ToString(s.ParentShardId)] {
				continue
			}
			if iters[id] == nil {
				it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: s.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
				if err != nil {
					t.Fatalf("GetShardIterator %s: %v", id, err)
				}
				iters[id] = it.ShardIterator
			}
			rec, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iters[id]})
			if err != nil {
				t.Fatalf("GetRecords %s: %v", id, err)
			}
			got[id] = append(got[id], rec.Records...)
			iters[id] = rec.NextShardIterator
			if rec.NextShardIterator == nil {
				done[id] = true
			}
		}
		for _, recs := range got {
			n += len(recs)
		}
		all := true
		for _, s := range shards {
			all = all && done[aws.ToString(s.ShardId)]
		}
		if until(n) && (all || out.StreamDescription.StreamStatus == streamtypes.StreamStatusEnabled) {
			return got, shards
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream not read in 2 minutes: %d records, %d shards", n, len(shards))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStreamShardsSplitAndKeepEachItemInOrder(t *testing.T) {
	upstream := localUpstream(t, "AWS_ENDPOINT_URL_DYNAMODB")
	_, endpoint := MustStart(t, DynamoDB, upstream, WithStreamShards(StreamShards{Shards: 4, SplitAfter: 40, MaxDepth: 1}))
	db, st := dynamoClients(t, endpoint)
	ctx := t.Context()
	table := uniqueName("vshards")
	arn := streamTable(t, db, table)

	first, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatalf("DescribeStream: %v", err)
	}
	if n := len(first.StreamDescription.Shards); n != 4 {
		t.Fatalf("a new stream has %d shards, want 4", n)
	}
	// 60 items written 5 times each: 300 records, each item's in order.
	const items, writes = 60, 5
	for w := range writes {
		for i := range items {
			it := key("p"+strconv.Itoa(i%7), "s"+strconv.Itoa(i))
			it["n"] = &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(w)}
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
				t.Fatalf("PutItem: %v", err)
			}
		}
	}
	got, shards := readAll(t, st, arn, func(n int) bool { return n >= items*writes })

	// What the upstream holds, read without the proxy: a record per write
	// (a put the SDK sends again after losing its answer changes nothing,
	// so it adds no record).
	_, direct := dynamoClients(t, upstream)
	want, _ := readAll(t, direct, arn, func(n int) bool { return n >= items*writes })
	var upstreamSeqs []string
	for _, recs := range want {
		for _, r := range recs {
			upstreamSeqs = append(upstreamSeqs, aws.ToString(r.Dynamodb.SequenceNumber))
		}
	}
	if len(upstreamSeqs) != items*writes {
		t.Fatalf("upstream holds %d records, want %d", len(upstreamSeqs), items*writes)
	}

	seen := map[string]string{}   // sequence number → shard
	lastOf := map[string]string{} // item → its last sequence number
	shardOf := map[string]string{}
	parents := map[string]string{}
	closed := 0
	for _, s := range shards {
		parents[aws.ToString(s.ShardId)] = aws.ToString(s.ParentShardId)
		if s.SequenceNumberRange.EndingSequenceNumber != nil {
			closed++
		}
	}
	for _, s := range shards { // parents first, as listed
		id := aws.ToString(s.ShardId)
		for _, r := range got[id] {
			seq := aws.ToString(r.Dynamodb.SequenceNumber)
			if prev, dup := seen[seq]; dup {
				t.Fatalf("record %s in shards %s and %s", seq, prev, id)
			}
			seen[seq] = id
			item := fmt.Sprint(r.Dynamodb.Keys["pk"], r.Dynamodb.Keys["sk"])
			if last, ok := lastOf[item]; ok && !ledger.SeqLess(last, seq) {
				t.Errorf("item %s: record %s after %s, out of order", item, seq, last)
			}
			if prev, ok := shardOf[item]; ok && prev != id && parents[id] != prev {
				t.Errorf("item %s moved from shard %s to %s, which is not its child", item, prev, id)
			}
			lastOf[item], shardOf[item] = seq, id
		}
	}
	for _, seq := range upstreamSeqs {
		if _, ok := seen[seq]; !ok {
			t.Errorf("upstream record %s is in no shard", seq)
		}
	}
	if len(shards) <= 4 || closed == 0 {
		t.Errorf("after 300 records with SplitAfter 40: %d shards, %d closed; want splits", len(shards), closed)
	}

	// The table goes: every shard closes once read, and the reader ends.
	if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		t.Fatalf("DeleteTable: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		var nf *streamtypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			break // the upstream forgot it before the proxy read it again: also an end
		}
		if err != nil {
			t.Fatalf("DescribeStream after delete: %v", err)
		}
		open := 0
		for _, s := range out.StreamDescription.Shards {
			if s.SequenceNumberRange.EndingSequenceNumber == nil {
				open++
			}
		}
		if out.StreamDescription.StreamStatus == streamtypes.StreamStatusDisabled && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after DeleteTable: status %s, %d shards open", out.StreamDescription.StreamStatus, open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A read right after a write through the proxy sees it, though the
// stream's copy was pumped from the upstream moments before (pumpEvery
// would keep that copy otherwise): a reader woken by the write finds it.
func TestStreamShardsSeeAWriteAtOnce(t *testing.T) {
	db, st, table, arn := shardedStream(t, StreamShards{Shards: 1}, "woken")
	ctx := t.Context()
	desc, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
		ShardId: desc.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	iter := it.ShardIterator
	for i := range 5 {
		out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter}) // pumps
		if err != nil {
			t.Fatal(err)
		}
		iter = out.NextShardIterator
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("p", strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		out, err = st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 1 {
			t.Fatalf("write %d: the read right after it got %d records, want 1", i, len(out.Records))
		}
		iter = out.NextShardIterator
	}
}

func TestStreamShardsRefuseBadRequests(t *testing.T) {
	_, st, _, arn := shardedStream(t, StreamShards{Shards: 2}, "vshards-bad")
	ctx := t.Context()

	var nf *streamtypes.ResourceNotFoundException
	if _, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn + "x")}); !errors.As(err, &nf) {
		t.Errorf("DescribeStream of an unknown stream: %v, want ResourceNotFoundException", err)
	}
	if _, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(arn), ShardId: aws.String("shardId-nope"), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	}); !errors.As(err, &nf) {
		t.Errorf("GetShardIterator of an unknown shard: %v, want ResourceNotFoundException", err)
	}
	for _, it := range []string{"", "vshard:", "vshard:!!!", "vshard:e30", "arn:aws:dynamodb:x", string(make([]byte, 4096))} {
		_, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it)})
		var apiErr interface{ ErrorCode() string }
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
			t.Errorf("GetRecords(%.20q): %v, want ValidationException", it, err)
		}
	}
}

// holdTransport holds the requests of one X-Amz-Target until released.
type holdTransport struct {
	http.RoundTripper
	mu      sync.Mutex
	target  string
	held    chan struct{} // closed when a request is held
	release chan struct{}
}

func (h *holdTransport) hold(target string) (held <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.target, h.held, h.release = target, make(chan struct{}), make(chan struct{})
	rel := h.release
	return h.held, func() { close(rel) }
}

func (h *holdTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	match := h.target != "" && r.Header.Get("X-Amz-Target") == h.target
	var held, release chan struct{}
	if match {
		held, release = h.held, h.release
		h.target = ""
	}
	h.mu.Unlock()
	if match {
		close(held)
		<-release
	}
	return h.RoundTripper.RoundTrip(r)
}

func TestTransactionConflicts(t *testing.T) {
	upstream := localUpstream(t, "AWS_ENDPOINT_URL_DYNAMODB")
	ht := &holdTransport{RoundTripper: newTransport()}
	p, endpoint := MustStart(t, DynamoDB, upstream, WithTransport(ht), WithTransactionConflicts())
	db, _ := dynamoClients(t, endpoint)
	ctx := t.Context()
	table := uniqueName("conflicts")
	streamTable(t, db, table)
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	add := func(pk, sk string) ddbtypes.TransactWriteItem {
		return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{
			TableName: aws.String(table), Key: key(pk, sk), UpdateExpression: aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
		}}
	}
	codes := func(err error) []string {
		var tc *ddbtypes.TransactionCanceledException
		if !errors.As(err, &tc) {
			return nil
		}
		var out []string
		for _, r := range tc.CancellationReasons {
			out = append(out, aws.ToString(r.Code))
		}
		return out
	}

	// A transaction in flight on a#1 and a#2.
	held, release := ht.hold("DynamoDB_20120810.TransactWriteItems")
	first := make(chan error, 1)
	go func() {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{add("a", "1"), add("a", "2")}})
		first <- err
	}()
	<-held

	_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{add("b", "1"), add("a", "2")}})
	if got := fmt.Sprint(codes(err)); got != "[None TransactionConflict]" {
		t.Errorf("an overlapping transaction: %v (reasons %s), want reasons [None TransactionConflict]", err, got)
	}
	var tce *ddbtypes.TransactionConflictException
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("a", "1")}); !errors.As(err, &tce) {
		t.Errorf("PutItem on an item of a transaction in flight: %v, want TransactionConflictException", err)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("a", "2")}); !errors.As(err, &tce) {
		t.Errorf("DeleteItem on an item of a transaction in flight: %v, want TransactionConflictException", err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("a", "3")}); err != nil {
		t.Errorf("PutItem on another item: %v", err)
	}
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{add("b", "1")}}); err != nil {
		t.Errorf("a transaction on other items: %v", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the held transaction: %v", err)
	}
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{add("b", "1"), add("a", "2")}}); err != nil {
		t.Errorf("the same transaction once the first is answered: %v", err)
	}

	// A plain write in flight cancels a transaction on its item.
	held, release = ht.hold("DynamoDB_20120810.PutItem")
	go func() {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("c", "1")})
		first <- err
	}()
	<-held
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{add("c", "1")}})
	if got := fmt.Sprint(codes(err)); got != "[TransactionConflict]" {
		t.Errorf("a transaction on an item being put: %v, want reasons [TransactionConflict]", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the held put: %v", err)
	}
	if c := p.Stats().Counts.Conflicts; c != 4 {
		t.Errorf("Conflicts = %d, want 4", c)
	}

	// Off, nothing conflicts.
	if err := p.SetTransactionConflicts(false); err != nil {
		t.Fatal(err)
	}
	held, release = ht.hold("DynamoDB_20120810.TransactWriteItems")
	go func() {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{add("d", "1")}})
		first <- err
	}()
	<-held
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("d", "1")}); err != nil {
		t.Errorf("PutItem on an item of a transaction in flight, conflicts off: %v", err)
	}
	release()
	if err := <-first; err != nil {
		t.Errorf("held transaction, conflicts off: %v", err)
	}
}
