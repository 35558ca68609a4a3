package servers

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The integration tests install into the repository's own .local (as the
// project does) and the default cache dir; the first run builds versitygw.
// They skip when java or node is missing, unless DDBPIPE_REQUIRE_STACK=1.

func TestStackServesDynamoDBSQSAndS3(t *testing.T) {
	stack := mustStart(t, Options{})
	ctx := t.Context()
	cfg := mustConfig(t)

	t.Run("dynamodb with streams", func(t *testing.T) {
		db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(stack.DynamoDB) })
		created, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String("events"),
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
			BillingMode:          ddbtypes.BillingModePayPerRequest,
			StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
		})
		if err != nil {
			t.Fatalf("CreateTable: %v", err)
		}
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String("events"),
			Item:      map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}},
		})
		if err != nil {
			t.Fatalf("PutItem: %v", err)
		}

		streams := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(stack.DynamoDB) })
		stream, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: created.TableDescription.LatestStreamArn})
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		if len(stream.StreamDescription.Shards) == 0 {
			t.Fatal("stream has no shards")
		}
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn:         created.TableDescription.LatestStreamArn,
			ShardId:           stream.StreamDescription.Shards[0].ShardId,
			ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatalf("GetShardIterator: %v", err)
		}
		records, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatalf("GetRecords: %v", err)
		}
		if len(records.Records) != 1 || records.Records[0].EventName != streamtypes.OperationTypeInsert {
			t.Errorf("got stream records %+v, want one INSERT", records.Records)
		}
	})

	t.Run("sqs", func(t *testing.T) {
		q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(stack.SQS) })
		created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
		if err != nil {
			t.Fatalf("CreateQueue: %v", err)
		}
		queueURL, err := url.Parse(aws.ToString(created.QueueUrl))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := "http://"+queueURL.Host, stack.SQS; got != want {
			t.Errorf("queue URL %s: got host %s, want %s", queueURL, got, want)
		}
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: aws.String("hello")}); err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		if len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != "hello" {
			t.Errorf("got messages %+v, want one saying hello", got.Messages)
		}
	})

	t.Run("s3 with versioning", func(t *testing.T) {
		store := mustS3(t, cfg, stack)
		mustCreateVersionedBucket(t, store, "archive")
		for _, body := range []string{"v1", "v2"} {
			if _, err := store.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("archive"), Key: aws.String("a/b"), Body: strings.NewReader(body)}); err != nil {
				t.Fatalf("PutObject %s: %v", body, err)
			}
		}
		if got, want := mustGetObject(t, store, "archive", "a/b"), "v2"; got != want {
			t.Errorf("GetObject: got %q, want %q", got, want)
		}
		versions, err := store.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("archive")})
		if err != nil {
			t.Fatalf("ListObjectVersions: %v", err)
		}
		if got := len(versions.Versions); got != 2 {
			t.Errorf("got %d versions, want 2", got)
		}
	})

	t.Run("search", func(t *testing.T) {
		mustIndexDoc(t, stack.Search, "events", "a/b c", `{"words":"hello search"}`)
		if got := mustSearchIDs(t, stack.Search, "events", "hello"); got != `["a/b c"]` {
			t.Errorf("search found %s, want [\"a/b c\"]", got)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, stack.Search+"/api/index", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("without credentials: %s, want 401", resp.Status)
		}
	})

	t.Run("listens on 127.0.0.1 only", func(t *testing.T) {
		for name, base := range map[string]string{DynamoDBServer: stack.DynamoDB, SQSServer: stack.SQS, S3Server: stack.S3, SearchServer: stack.Search} {
			if name == DynamoDBServer && stack.dynamoAllInterfaces {
				t.Logf("%s: no javac, so it listens on all interfaces", name)
				continue
			}
			addrs := mustListeners(t, mustPort(t, base))
			if len(addrs) == 0 {
				t.Errorf("%s: no listening socket on %s", name, base)
			}
			for _, a := range addrs {
				if !a.IsLoopback() {
					t.Errorf("%s: listens on %s", name, a)
				}
			}
		}
	})

	t.Run("stream records indexed", func(t *testing.T) {
		if stack.dynamoAllInterfaces {
			t.Skip("no javac, so DynamoDB Local runs without the launcher that adds the index")
		}
		if logs := stack.Logs(DynamoDBServer); !strings.Contains(logs, "ddbpipe: stream records indexed by stream and by shard") {
			t.Errorf("DynamoDB Local's output does not say the index was added:\n%s", logs)
		}
	})

	rss, err := stack.RSSBytes()
	if err != nil {
		t.Fatalf("RSSBytes: %v", err)
	}
	var each []string
	for _, p := range stack.procs {
		n, err := rssBytes(p.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		each = append(each, fmt.Sprintf("%s %d MiB", p.name, n>>20))
	}
	t.Logf("stack RSS: %d MiB (%s)", rss>>20, strings.Join(each, ", "))
	if rss <= 0 {
		t.Errorf("RSSBytes = %d, want > 0", rss)
	}

	pids, tempDir := stack.PIDs(), stack.tempDir
	if err := stack.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := stack.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d after Stop: kill 0 = %v, want ESRCH", pid, err)
		}
	}
	if _, err := os.Stat(tempDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temp dir %s after Stop: %v, want it removed", tempDir, err)
	}
}

func TestStackKeepsDataInDataDir(t *testing.T) {
	dataDir := t.TempDir()
	cfg := mustConfig(t)
	ctx := t.Context()

	first := mustStart(t, Options{DataDir: dataDir})
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(first.DynamoDB) })
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("kept"),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	mustIndexDoc(t, first.Search, "kept", "k", `{"words":"still here"}`)
	store := mustS3(t, cfg, first)
	mustCreateVersionedBucket(t, store, "kept")
	if _, err := store.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("kept"), Key: aws.String("k"), Body: strings.NewReader("still here")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	// Restart: the S3 server goes down and comes back on its port with its
	// objects, a new process.
	pidsBefore := first.PIDs()
	down, err := first.Restart(ctx, S3Server, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got, want := mustGetObject(t, store, "kept", "k"), "still here"; got != want {
		t.Errorf("object after Restart (down %s): got %q, want %q", down, got, want)
	}
	if slices.Equal(first.PIDs(), pidsBefore) {
		t.Errorf("Restart left the same processes %v", pidsBefore)
	}
	if _, err := first.Restart(ctx, SearchServer, 0); err != nil {
		t.Fatalf("Restart search: %v", err)
	}
	if got := mustSearchIDs(t, first.Search, "kept", "still"); got != `["k"]` {
		t.Errorf("search after Restart: %s", got)
	}
	if _, err := first.Restart(ctx, "ftp", 0); err == nil {
		t.Error("Restart of an unknown server: no error")
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	second := mustStart(t, Options{DataDir: dataDir})
	db = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(second.DynamoDB) })
	tables, err := db.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	if !slices.Equal(tables.TableNames, []string{"kept"}) {
		t.Errorf("tables after restart: got %v, want [kept]", tables.TableNames)
	}
	if got, want := mustGetObject(t, mustS3(t, cfg, second), "kept", "k"), "still here"; got != want {
		t.Errorf("object after restart: got %q, want %q", got, want)
	}
	if got := mustSearchIDs(t, second.Search, "kept", "still"); got != `["k"]` {
		t.Errorf("search after the stack's restart: %s", got)
	}
}

func TestFromEnvReadsTheSearchEngine(t *testing.T) {
	env := map[string]string{EnvDynamoDB: "http://127.0.0.1:1", EnvSQS: "http://127.0.0.1:2", EnvS3: "http://127.0.0.1:3"}
	st, ok := FromEnv(func(k string) string { return env[k] })
	if !ok || st.Search != "" {
		t.Fatalf("without %s: %+v %t, want a stack with no Search", EnvSearch, st, ok)
	}
	if _, set := st.Vars()[EnvSearch]; set {
		t.Errorf("Vars names a search engine it does not have")
	}
	env[EnvSearch] = "http://127.0.0.1:4"
	st, ok = FromEnv(func(k string) string { return env[k] })
	if !ok || st.Search != env[EnvSearch] || st.Vars()[EnvSearch] != env[EnvSearch] {
		t.Errorf("with %s: %+v, Vars %v", EnvSearch, st, st.Vars())
	}
}

// mustIndexDoc indexes a document through ZincSearch's bulk API.
func mustIndexDoc(t *testing.T, base, index, id, source string) {
	t.Helper()
	meta := fmt.Sprintf(`{"index":{"_index":%q,"_id":%q}}`, index, id)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/es/_bulk", strings.NewReader(meta+"\n"+source+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(SearchUser, SearchPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("bulk: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"errors":false`) {
		t.Fatalf("bulk: %s %s", resp.Status, body)
	}
}

// mustSearchIDs waits until a match query for words finds something (the
// engine makes writes searchable on a timer) and returns the ids, as JSON.
func mustSearchIDs(t *testing.T, base, index, words string) string {
	t.Helper()
	q := fmt.Sprintf(`{"query":{"match":{"words":%q}},"_source":false}`, words)
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/es/"+index+"/_search", strings.NewReader(q))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(SearchUser, SearchPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("search: %v", err)
		}
		var out struct {
			Hits struct {
				Hits []struct {
					ID string `json:"_id"`
				} `json:"hits"`
			} `json:"hits"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err == nil && len(out.Hits.Hits) > 0 || time.Now().After(deadline) {
			ids := []string{}
			for _, h := range out.Hits.Hits {
				ids = append(ids, h.ID)
			}
			b, _ := json.Marshal(ids)
			return string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartReportsServersThatAreNotReady(t *testing.T) {
	requireStackTools(t)
	_, err := Start(t.Context(), Options{Root: repoRoot(t), Log: testLog{t}, ReadyTimeout: time.Nanosecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	for _, want := range []string{"DynamoDB Local", "SQS (fauxqs)", "S3 (versitygw)", "search (ZincSearch)", "last lines of its output"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseProcNetAddr(t *testing.T) {
	tests := []struct {
		hex  string
		want string
	}{
		{"0100007F", "127.0.0.1"},
		{"00000000", "0.0.0.0"},
		{"0000000000000000FFFF00000100007F", "127.0.0.1"},
		{"00000000000000000000000001000000", "::1"},
		{"00000000000000000000000000000000", "::"},
	}
	for _, tt := range tests {
		got, err := parseProcNetAddr(tt.hex)
		if err != nil || got.String() != tt.want {
			t.Errorf("parseProcNetAddr(%s) = %v, %v; want %s", tt.hex, got, err, tt.want)
		}
	}
}

// requireStackTools skips the test when the servers cannot run here, or
// fails it when DDBPIPE_REQUIRE_STACK=1 says they must.
func requireStackTools(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"java", "node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	var reason string
	switch {
	case len(missing) > 0:
		reason = fmt.Sprintf("local AWS stack needs %s on PATH", strings.Join(missing, ", "))
	case testing.Short():
		reason = "local AWS stack not started in -short mode"
	default:
		return
	}
	if os.Getenv("DDBPIPE_REQUIRE_STACK") == "1" {
		t.Fatalf("%s (DDBPIPE_REQUIRE_STACK=1)", reason)
	}
	t.Skipf("%s; set DDBPIPE_REQUIRE_STACK=1 to fail instead", reason)
}

// mustStart starts a stack for the test and stops it at cleanup.
func mustStart(t *testing.T, o Options) *Stack {
	t.Helper()
	requireStackTools(t)
	o.Root, o.Log = repoRoot(t), testLog{t}
	stack, err := Start(t.Context(), o)
	if errors.Is(err, ErrMissingTool) && os.Getenv("DDBPIPE_REQUIRE_STACK") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := stack.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return stack
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func mustConfig(t *testing.T) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(t.Context(),
		config.WithRegion(Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")),
	)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustS3(t *testing.T, cfg aws.Config, stack *Stack) *s3.Client {
	t.Helper()
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(stack.S3)
		o.UsePathStyle = true
	})
}

func mustCreateVersionedBucket(t *testing.T, store *s3.Client, bucket string) {
	t.Helper()
	ctx := t.Context()
	if _, err := store.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	_, err := store.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	got, err := store.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("GetBucketVersioning: %v", err)
	}
	if got.Status != s3types.BucketVersioningStatusEnabled {
		t.Fatalf("versioning status: got %q, want Enabled", got.Status)
	}
}

func mustGetObject(t *testing.T, store *s3.Client, bucket, key string) string {
	t.Helper()
	obj, err := store.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer obj.Body.Close()
	body, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	return string(body)
}

func mustPort(t *testing.T, base string) int {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("port of %s: %v", base, err)
	}
	return port
}

// mustListeners returns the addresses of the TCP sockets listening on port,
// from /proc/net/tcp and tcp6.
func mustListeners(t *testing.T, port int) []netip.Addr {
	t.Helper()
	var addrs []netip.Addr
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st ...; st 0A is LISTEN.
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" {
				continue
			}
			hexAddr, hexPort, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err != nil || int(p) != port {
				continue
			}
			addr, err := parseProcNetAddr(hexAddr)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			addrs = append(addrs, addr)
		}
	}
	return addrs
}

// parseProcNetAddr decodes an address from /proc/net/tcp{,6}: hex of 32-bit
// words in host byte order (little-endian here). IPv4-mapped IPv6 addresses
// are unmapped.
func parseProcNetAddr(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		return netip.Addr{}, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(b); i += 4 {
		slices.Reverse(b[i : i+4])
	}
	addr, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.Addr{}, fmt.Errorf("bad address %q", s)
	}
	return addr.Unmap(), nil
}

// testLog sends Start's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
