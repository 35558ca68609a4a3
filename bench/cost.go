package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/tools/pngchart"
)

// List prices, us-east-1, USD, as of this code's writing (late 2025): check
// https://aws.amazon.com/dynamodb/pricing/on-demand/,
// https://aws.amazon.com/sqs/pricing/ and https://aws.amazon.com/lambda/pricing/
// before relying on them. Free tiers are left out.
const (
	// DynamoDB on-demand, standard table class: per million write request
	// units (halved to $0.625 on 1 November 2024).
	usdPerMillionWRU = 0.625
	// SQS standard queues: per million requests, each 64 KB chunk of a
	// request's payload billed as one request.
	usdPerMillionSQS = 0.40
	// Lambda on arm64 (Graviton): per GB-second of duration (first price
	// tier, up to 7.5 billion GB-s a month) and per million requests.
	usdPerLambdaArmGBs        = 0.0000133334
	usdPerMillionLambdaInvoke = 0.20
)

// counterMemoryMB is the counter function's memory in the provisioned
// template (the Globals' MemorySize unless the function sets its own).
func counterMemoryMB(env *stack.Env) int {
	fns, err := env.Stack.Functions()
	if err == nil {
		for _, f := range fns {
			if f.LogicalID == "CounterFunction" && f.MemoryMB > 0 {
				return f.MemoryMB
			}
		}
	}
	return 256
}

// votesCost writes the cost per million votes of each consumer, from what
// the proxies and the runner counted in the runs.
func votesCost(s *section, env *stack.Env, runs []runStats) {
	mb := counterMemoryMB(env)
	s.printf("\n### Cost per million votes\n\n"+
		"From the requests counted in the runs at AWS's 1,000 units per key above (%d votes each, ten-option spread), scaled to\n"+
		"a million votes, × us-east-1 list prices as of late 2025 (check the AWS pricing pages; free tiers left out): DynamoDB\n"+
		"on-demand $%.3f per million write request units (the units the key limiter admitted on the poll's counter and ledger\n"+
		"keys: throttled requests are not billed), SQS standard $%.2f per million requests (the SQS proxy's count: the producer's\n"+
		"send batches, the pollers' receives, empty long polls included, and delete batches; every vote message is far below\n"+
		"the 64 KB billing chunk, so a request is one billed request), Lambda arm64 $%.10f per GB-s and $%.2f per million\n"+
		"invocations (invocations × the handler's measured duration × the counter's %d MB from template.yaml). Durations are\n"+
		"DynamoDB Local's, not AWS's: on AWS a transaction takes ~10–20 ms, so Lambda's share is a rough figure; requests and\n"+
		"units are what AWS would bill.\n\n", runs[0].n, usdPerMillionWRU, usdPerMillionSQS, usdPerLambdaArmGBs, usdPerMillionLambdaInvoke, mb)
	s.printf("| consumer | write units per vote (ledger + counters) | SQS requests per 1,000 votes (send + receive + delete + other) | invocations per million votes | GB-s per million votes | DynamoDB $ | SQS $ | Lambda $ | **total $ per million votes** |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	chart := pngchart.Chart{Title: "modelled USD per million votes", Unit: "$"}
	for _, r := range runs {
		per := 1e6 / float64(r.n)
		units := r.units() * per
		sqsReq := float64(r.sqsSend+r.sqsReceive+r.sqsDelete+r.sqsOther) * per
		inv := float64(r.invocations) * per
		gbs := r.handlerTime.Seconds() * per * float64(mb) / 1024
		ddb := units / 1e6 * usdPerMillionWRU
		q := sqsReq / 1e6 * usdPerMillionSQS
		fn := gbs*usdPerLambdaArmGBs + inv/1e6*usdPerMillionLambdaInvoke
		k := 1000 / float64(r.n)
		s.printf("| %s | %.2f + %.3f | %.0f (%.0f + %.0f + %.0f + %.1f) | %.0f | %.0f | %.3f | %.3f | %.3f | **%.3f** |\n",
			r.label, r.ledgerUnits/float64(r.n), r.counterUnits/float64(r.n),
			sqsReq/1000, float64(r.sqsSend)*k, float64(r.sqsReceive)*k, float64(r.sqsDelete)*k, float64(r.sqsOther)*k,
			inv, gbs, ddb, q, fn, ddb+q+fn)
		chart.Bars = append(chart.Bars, pngchart.Bar{Label: r.label, Value: ddb + q + fn})
	}
	s.printf("\nThe naive consumer writes one unit per vote and no ledger, so it is the cheapest and cannot deduplicate a redelivery;\n" +
		"exactly-once pays two units per ledger put (transactional) for that guarantee, at-least-once one. SQS costs the same\n" +
		"for all three (the same messages sent, received and deleted); Lambda is a small share at BatchSize 1000.\n")
	s.charts = append(s.charts, chart)
}

// objectsCost writes the objects flow's cost per 1,000 PUTs and GETs of a
// typical document for each placement, from write units and S3 requests
// counted by the proxies.
func objectsCost(ctx context.Context, s *section, env *stack.Env, scale float64) error {
	type doc struct {
		label string
		body  []byte
		pol   objectsPolicy
	}
	pols := objectsPolicies() // our policy, always inline, always S3
	docs := []doc{
		{"1 KB random", objectstest.Random(1<<10, 4), pols[0]},
		{"1 KB text", objectstest.Text(1 << 10), pols[0]},
		{"100 KB text", objectstest.Text(100 << 10), pols[0]},
		{"399 KB random", objectstest.Random(399<<10, 2), pols[1]},
		{"399 KB random", objectstest.Random(399<<10, 2), pols[0]},
	}
	ops := max(5, int(20*scale))
	table := env.Vars["OBJECTS_TABLE_NAME"]
	// The S3 PUT-class requests of this store's own client: the S3 proxy
	// also sees the archive's uploads of the ledger's stream.
	var puts atomic.Int64
	s3cfg := env.AWS.Copy()
	base := s3cfg.HTTPClient
	if base == nil {
		base = awshttp.NewBuildableClient()
	}
	s3cfg.HTTPClient = putCounter{base: base, n: &puts}
	s3Puts := puts.Load
	store := func(pol objects.Policy) *objects.Store {
		items := objectsddb.New(env.Clients.DynamoDB, table)
		return &objects.Store{Items: items, Chunks: items, Blobs: objectss3.FromClient(awsenv.S3(s3cfg), env.Vars["OBJECTS_BUCKET_NAME"]), Policy: pol, MaxVersions: 1000}
	}
	ddbProxy := env.Proxies[faultproxy.DynamoDB]
	unitsOn := func() float64 {
		var u float64
		for _, k := range ddbProxy.HotKeys() {
			if k.Table == table {
				u += k.AdmittedUnits
			}
		}
		return u
	}
	s.printf("\n### Objects: cost per 1,000 PUTs by placement\n\n"+
		"%d new documents per row written with `Store.Put` through the proxies: the write units the DynamoDB proxy admitted on the\n"+
		"objects table and the PUT-class requests (PUT, POST) of the store's S3 client, per 1,000 PUTs, × the list prices above and S3\n"+
		"Standard's $%.3f per 1,000 PUTs; the read column is the model of `objects.Prices` (strongly consistent read of v0 plus\n"+
		"the blob GET or the chunks) per 1,000 GETs. The model's write figure (`objects.Prices.WriteCost`, the design's counts:\n"+
		"v0 and vN in one transaction, 2 units per KB each, plus the blob PUT or the chunk puts) is beside the measured one.\n\n",
		ops, objects.DefaultPrices.S3Put*1000)
	s.printf("| document | placement | write units per PUT | S3 PUTs per PUT | $ per 1,000 PUTs, measured | $ per 1,000 PUTs, model | $ per 1,000 GETs, model |\n|---|---|---:|---:|---:|---:|---:|\n")
	run := time.Now().UnixNano()
	for i, d := range docs {
		st := store(d.pol.policy)
		opts := objects.PutOptions{ContentType: "application/octet-stream", NoCompress: d.pol.noCompress, KeepInTable: d.pol.keep}
		u0, p0 := unitsOn(), s3Puts()
		var rec objects.Record
		for j := range ops {
			var err error
			rec, err = st.Put(ctx, fmt.Sprintf("bench/cost/%d/%d/%d", run, i, j), d.body, opts)
			if err != nil {
				return fmt.Errorf("objects cost: put %s: %w", d.label, err)
			}
		}
		units := (unitsOn() - u0) / float64(ops)
		s3PerPut := float64(s3Puts()-p0) / float64(ops)
		pl, err := placementOf(d.pol, d.body)
		if err != nil {
			return err
		}
		placement := string(rec.Kind)
		if rec.Kind == objects.Chunked {
			placement += fmt.Sprintf(", %d chunks", pl.Chunks)
		}
		measured := 1000 * (units*objects.DefaultPrices.WriteUnit + s3PerPut*objects.DefaultPrices.S3Put)
		s.printf("| %s | %s | %.1f | %.1f | %.4f | %.4f | %.5f |\n", d.label, placement, units, s3PerPut, measured,
			1000*objects.DefaultPrices.WriteCost(pl), 1000*objects.DefaultPrices.ReadCost(pl))
	}
	return nil
}

// putCounter is an aws.HTTPClient that counts S3's PUT-class requests
// (PUT and POST: PutObject, the multipart calls).
type putCounter struct {
	base aws.HTTPClient
	n    *atomic.Int64
}

func (c putCounter) Do(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		c.n.Add(1)
	}
	return c.base.Do(r)
}
