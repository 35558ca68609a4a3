package ddbstream

// Failure is the record Lambda sends to a stream event source mapping's
// on-failure destination when it gives up on a batch (retries or record
// age exhausted): the batch's place in the stream, not its records. The
// local runner writes it; the operator's commands and the soak read it.
// events/stream-failure.json is one.
type Failure struct {
	RequestContext  FailureRequest  `json:"requestContext"`
	ResponseContext FailureResponse `json:"responseContext"`
	Version         string          `json:"version"`
	Timestamp       string          `json:"timestamp"` // RFC 3339, when Lambda gave up
	// Batch is nil when the message is not a DynamoDB stream's failure.
	Batch *FailedBatch `json:"DDBStreamBatchInfo,omitempty"`
}

// FailureRequest says whose batch it was and why it was given up.
type FailureRequest struct {
	RequestID              string `json:"requestId"`
	FunctionARN            string `json:"functionArn"`
	Condition              string `json:"condition"` // RetryAttemptsExhausted, RecordAgeExceeded
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

// FailureResponse is the last invocation's answer.
type FailureResponse struct {
	StatusCode      int    `json:"statusCode"`
	ExecutedVersion string `json:"executedVersion"`
	FunctionError   string `json:"functionError"`
}

// FailedBatch is the batch's place: its shard and sequence range.
type FailedBatch struct {
	ShardID             string `json:"shardId"`
	StartSequenceNumber string `json:"startSequenceNumber"`
	EndSequenceNumber   string `json:"endSequenceNumber"`
	FirstArrival        string `json:"approximateArrivalOfFirstRecord"` // RFC 3339
	LastArrival         string `json:"approximateArrivalOfLastRecord"`
	BatchSize           int    `json:"batchSize"`
	StreamARN           string `json:"streamArn"`
}
