package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/bodies"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/votes"
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

// DynamoDB's latencies, for Lambda's time modelled at AWS's pace. AWS
// documents reads and writes in "single-digit milliseconds" within a
// region; these take the upper half of that range as assumptions (not
// measurements), and a transaction as two writes (it prepares, then
// commits). The model is each function's critical path: its calls one
// after another, the counter's puts Counter.Parallel at a time.
const (
	awsReadLatency  = 5 * time.Millisecond
	awsWriteLatency = 8 * time.Millisecond
	awsTxLatency    = 2 * awsWriteLatency
)

// awsHandlerTime models a run's Lambda time (the consumer's, the tally's)
// at AWS's latencies. The naive consumer writes one UpdateItem after
// another on one item, and when its invocations together would go faster
// than the key's limit (keyLimit units a second), every one of them waits
// on throttling for the run's length. ddbpipe's counter reads the batch's
// polls, then puts the ledger items Parallel at a time; its tally reads its
// checkpoint and commits its transactions one after another.
func awsHandlerTime(r runStats, d deployment, keyLimit float64) (consumer, tally time.Duration) {
	if r.consumer == naiveLabel {
		alone := time.Duration(r.n) * awsWriteLatency
		atLimit := time.Duration(float64(d.concurrency) * float64(r.n) / keyLimit * float64(time.Second))
		return max(alone, atLimit), 0
	}
	rounds := r.keys.ledger/votes.DefaultParallel + float64(r.invocations)
	consumer = time.Duration(r.invocations)*awsReadLatency + time.Duration(rounds*float64(awsWriteLatency))
	tally = time.Duration(r.tally.invocations)*awsReadLatency + time.Duration(r.tally.commits*float64(awsTxLatency))
	return consumer, tally
}

// memoryMB is a function's memory in the provisioned template (the
// Globals' MemorySize unless the function sets its own).
func memoryMB(env *stack.Env, logicalID string) int {
	fns, err := env.Stack.Functions()
	if err == nil {
		for _, f := range fns {
			if f.LogicalID == logicalID && f.MemoryMB > 0 {
				return f.MemoryMB
			}
		}
	}
	return 256
}

// usdPerMillion is a modelled cost per million votes, by service.
type usdPerMillion struct{ dynamodb, sqs, lambda float64 }

func (u usdPerMillion) total() float64 { return u.dynamodb + u.sqs + u.lambda }

// votesCost writes the cost per million votes of each consumer, from what
// the proxies and the runners counted in the runs at AWS's limit (the naive
// run, then ddbpipe's), and returns ddbpipe's.
func votesCost(s *section, env *stack.Env, d deployment, runs [2]runStats) (local, atAWS [2]usdPerMillion) {
	counterMB, tallyMB := memoryMB(env, "CounterFunction"), memoryMB(env, "TallyFunction")
	s.printf("\n### Cost per million votes\n\n"+
		"From the requests counted in the runs at AWS's limit above (%d votes each, ten-option spread), scaled to a million\n"+
		"votes, × us-east-1 list prices as of late 2025 (check the AWS pricing pages; free tiers left out): DynamoDB on-demand\n"+
		"$%.3f per million write request units (the units the proxy admitted on the poll's ledger and counter keys and on\n"+
		"the tally's checkpoints: throttled requests are not billed), SQS standard $%.2f per million requests (on the run's\n"+
		"queue: the producer's send batches, the pollers' receives, empty long polls included, and delete batches; a vote\n"+
		"message is far below the 64 KB billing chunk), Lambda arm64 $%.10f per GB-s and $%.2f per million invocations\n"+
		"(invocations × measured handler time × memory from template.yaml: the consumer at the counter's %d MB, ddbpipe's tally\n"+
		"at %d MB, its invocations while the run lasted). Durations are DynamoDB Local's, not AWS's, so Lambda's share is a\n"+
		"rough figure; requests and units are what AWS would bill. Reads are left out (the counter reads the batch's polls\n"+
		"once per batch, the tally its checkpoint and polls once per batch); Lambda's reads of the ledger's stream are free.\n\n",
		runs[0].n, usdPerMillionWRU, usdPerMillionSQS, usdPerLambdaArmGBs, usdPerMillionLambdaInvoke, counterMB, tallyMB)
	s.printf("| consumer | write units per vote | SQS requests per 1,000 votes (send + receive + delete + other) | invocations per million votes (consumer + tally) | GB-s per million votes, here / at AWS's latencies | DynamoDB $ | SQS $ | Lambda $, here / at AWS's latencies | **total $ per million votes, here / at AWS's latencies** |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	chart := pngchart.Chart{Title: "modelled USD per million votes", Unit: "$"}
	for i, r := range runs {
		perM := 1e6 / float64(r.n)
		units := r.unitsPerVote() * 1e6
		q := r.sqs
		k := 1000 / float64(r.n)
		inv := float64(r.invocations+r.tally.invocations) * perM
		gbsOf := func(consumer, tally time.Duration) float64 {
			return (consumer.Seconds()*float64(counterMB) + tally.Seconds()*float64(tallyMB)) / 1024 * perM
		}
		gbs := gbsOf(r.handlerTime, r.tally.handlerTime)
		gbsAWS := gbsOf(awsHandlerTime(r, d, awsKeyLimit()))
		c := usdPerMillion{
			dynamodb: units / 1e6 * usdPerMillionWRU,
			sqs:      float64(q.total()) * perM / 1e6 * usdPerMillionSQS,
			lambda:   gbs*usdPerLambdaArmGBs + inv/1e6*usdPerMillionLambdaInvoke,
		}
		a := c
		a.lambda = gbsAWS*usdPerLambdaArmGBs + inv/1e6*usdPerMillionLambdaInvoke
		local[i], atAWS[i] = c, a
		s.printf("| %s | %.3f | %.0f (%.0f + %.0f + %.0f + %.1f) | %.0f + %.0f | %.0f / %.0f | %.3f | %.3f | %.3f / %.3f | **%.3f / %.3f** |\n",
			r.consumer, r.unitsPerVote(), float64(q.total())*k, float64(q.send)*k, float64(q.receive)*k, float64(q.delete)*k, float64(q.other)*k,
			float64(r.invocations)*perM, float64(r.tally.invocations)*perM, gbs, gbsAWS, c.dynamodb, c.sqs, c.lambda, a.lambda, c.total(), a.total())
		chart.Bars = append(chart.Bars, pngchart.Bar{Label: r.consumer + " here", Value: c.total()},
			pngchart.Bar{Label: r.consumer + " at AWS's latencies", Value: a.total()})
	}
	ours := runs[1]
	s.printf("\nDynamoDB and SQS are what AWS would bill for the requests counted: $%.3f per million votes for ddbpipe. Lambda's\n"+
		"share is measured at DynamoDB Local's pace: ddbpipe's counter spent %.2f ms of handler time per vote, up to %d\n"+
		"invocations at once, each with several puts in flight (Counter.Parallel), queueing for the %.0f write units per\n"+
		"second DynamoDB Local took: about the invocations in flight ÷ that rate (%.2f ms), the emulator's queue, not work.\n",
		local[1].dynamodb+local[1].sqs, ours.handlerTime.Seconds()*1000/float64(ours.n), d.concurrency, ours.writeRate(),
		float64(d.concurrency)/ours.writeRate()*1000)
	diff, more := local[1].total()-local[0].total(), "more"
	if diff < 0 {
		diff, more = -diff, "less" // Lambda's share, measured on the emulator, can outweigh the units
	}
	s.printf("\nddbpipe costs $%.3f %s per million votes than the naive consumer and writes %.3f units per vote more: for those\n"+
		"its ledger keeps every vote once (a redelivered vote finds its key taken and is not counted again; the naive\n"+
		"consumer counts it twice) and its writes spread over %d ledger keys per poll instead of one item.\n",
		diff, more, ours.unitsPerVote()-runs[0].unitsPerVote(), votes.LedgerSuffixes)
	s.printf("\nAt AWS's latencies (an assumption: reads %s, writes %s, a transaction %s, from DynamoDB's documented\n"+
		"single-digit milliseconds; each function's calls on its critical path, the counter's puts %d at a time; the naive\n"+
		"consumer's invocations all busy while its one item takes %.0f units a second), ddbpipe costs **%.2f×** the naive\n"+
		"consumer ($%.3f against $%.3f per million votes); at DynamoDB Local's pace, %.2f×.\n",
		awsReadLatency, awsWriteLatency, awsTxLatency, votes.DefaultParallel, awsKeyLimit(), atAWS[1].total()/atAWS[0].total(),
		atAWS[1].total(), atAWS[0].total(), local[1].total()/local[0].total())
	s.charts = append(s.charts, chart)
	return local, atAWS
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
		{"1 KB random", bodies.Random(1<<10, 4), pols[0]},
		{"1 KB text", bodies.Text(1 << 10), pols[0]},
		{"100 KB text", bodies.Text(100 << 10), pols[0]},
		{"399 KB random", bodies.Random(399<<10, 2), pols[1]},
		{"399 KB random", bodies.Random(399<<10, 2), pols[0]},
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
