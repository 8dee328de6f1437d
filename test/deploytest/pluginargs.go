package deploytest

// PluginArgs are the Regosched plugin's args (pluginConfig[].args of
// regosched-scheduler's KubeSchedulerConfiguration), as the chart tests
// decode them strictly: an unknown arg is an error to the plugin, so the
// chart must write these names and no other. This module cannot import
// the plugin's Args (the scheduler module's), so they are mirrored here
// and the plugin's TestDeploytestMirrorsArgs fails when the two differ;
// the policy's, shadow policy's and decision log's names are checked
// against internal/frontend/settings here too.
type PluginArgs struct {
	Policy                   string             `json:"policy,omitempty"`
	ShadowPolicy             string             `json:"shadowPolicy,omitempty"`
	PolicyData               string             `json:"policyData,omitempty"`
	PolicyPoll               string             `json:"policyPoll,omitempty"`
	PolicyMinDelay           string             `json:"policyMinDelay,omitempty"`
	PolicyMaxDelay           string             `json:"policyMaxDelay,omitempty"`
	PolicyLongPollingTimeout string             `json:"policyLongPollingTimeout,omitempty"`
	PolicyStartTimeout       string             `json:"policyStartTimeout,omitempty"`
	PolicyBearerTokenFile    string             `json:"policyBearerTokenFile,omitempty"`
	PolicyCACert             string             `json:"policyCACert,omitempty"`
	PolicyInsecure           bool               `json:"policyInsecure,omitempty"`
	PolicyMaxBytes           int64              `json:"policyMaxBytes,omitempty"`
	PolicyMaxTotalBytes      int64              `json:"policyMaxTotalBytes,omitempty"`
	PolicyMaxEntries         int                `json:"policyMaxEntries,omitempty"`
	PolicyVerificationKey    string             `json:"policyVerificationKey,omitempty"`
	PolicyVerificationKeyID  string             `json:"policyVerificationKeyID,omitempty"`
	PolicySigningAlg         string             `json:"policySigningAlg,omitempty"`
	PolicyScope              string             `json:"policyScope,omitempty"`
	PolicyRunTests           bool               `json:"policyRunTests,omitempty"`
	LogLevel                 string             `json:"logLevel,omitempty"`
	SyncTimeout              string             `json:"syncTimeout,omitempty"`
	DecisionLog              *PluginDecisionLog `json:"decisionLog,omitempty"`
}

// PluginDecisionLog is the plugin arg decisionLog (the plugin's
// DecisionLogArgs).
type PluginDecisionLog struct {
	Target           string   `json:"target,omitempty"`
	Sample           *float64 `json:"sample,omitempty"`
	MaskLabels       []string `json:"maskLabels,omitempty"`
	MaskMode         string   `json:"maskMode,omitempty"`
	BufferSize       int      `json:"bufferSize,omitempty"`
	FlushInterval    string   `json:"flushInterval,omitempty"`
	Timeout          string   `json:"timeout,omitempty"`
	MaxRetries       *int     `json:"maxRetries,omitempty"`
	UploadLimitBytes int      `json:"uploadLimitBytes,omitempty"`
	CACert           string   `json:"caCert,omitempty"`
	BearerTokenFile  string   `json:"bearerTokenFile,omitempty"`
	Insecure         bool     `json:"insecure,omitempty"`
}
