package plugin

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// env is what every command uses: the streams, the cluster flags and the
// client made from them.
type env struct {
	out, errOut io.Writer

	kubeconfig, context, namespace string
	allNamespaces                  bool
	output                         string

	client client.Client
	// ns is the namespace the commands work in, from -n or the kubeconfig.
	ns string
}

// Main runs the plugin with args and returns the process exit code.
func Main(args []string, out, errOut io.Writer) int {
	e := &env{out: out, errOut: errOut}
	root := e.rootCmd()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	if err := root.Execute(); err != nil {
		_, _ = fmt.Fprintln(errOut, "error:", err)
		return 1
	}
	return 0
}

func (e *env) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-burstcache",
		Short: "Show burstcache pools, instances, servers and usage; ask for flush, evict, invalidate and preload",
		Long: `kubectl burstcache shows what burstcache runs, as DataWarp's dwstat does, and
asks an instance's servers for user hints, as dwcli does. Hints go through the
Kubernetes API: whoever may patch a CacheInstance may ask.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(*cobra.Command, []string) error { return e.connect() },
		// Every command connects first (PersistentPreRunE), which a
		// completion script must not need; the plugin offers none.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	fl := root.PersistentFlags()
	fl.StringVar(&e.kubeconfig, "kubeconfig", "", "path to the kubeconfig file")
	fl.StringVar(&e.context, "context", "", "the kubeconfig context to use")
	fl.StringVarP(&e.namespace, "namespace", "n", "", "the namespace (default: the context's)")
	root.AddCommand(e.poolsCmd(), e.instancesCmd(), e.serversCmd(), e.usageCmd())
	for _, op := range []cachev1alpha1.RequestOperation{
		cachev1alpha1.RequestFlush, cachev1alpha1.RequestEvict, cachev1alpha1.RequestInvalidate, cachev1alpha1.RequestPreload,
	} {
		root.AddCommand(e.hintCmd(op))
	}
	return root
}

// connect reads the kubeconfig as kubectl does and makes the client.
func (e *env) connect() error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = e.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{
		CurrentContext: e.context, Context: clientcmdapi.Context{Namespace: e.namespace},
	})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if e.ns, _, err = cc.Namespace(); err != nil {
		return fmt.Errorf("finding the namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), cachev1alpha1.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	if e.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	return nil
}

// addOutputFlag adds -o to a command that prints tables.
func (e *env) addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&e.output, "output", "o", "", "output format: json or yaml (default: a table)")
}
