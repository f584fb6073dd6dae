// Command oraclekueue is gitopsq's differential-testing oracle: Kueue's core controllers and scheduler, wired
// the way Kueue's own benchmark command minimalkueue wires them (no webhooks, no job integrations), plus the
// knobs minimalkueue lacks: fair sharing with its preemption strategies, feature gates and the client rate
// limit. It links Kueue v0.19.2 as a library; nothing of Kueue is copied here.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuealpha "sigs.k8s.io/kueue/apis/kueue/v1alpha1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
)

var (
	fairSharing  = flag.Bool("fair-sharing", false, "enable fair sharing (as a Configuration with a fairSharing block)")
	strategies   = flag.String("fair-sharing-strategies", "", "comma-separated fairSharing.preemptionStrategies (empty: Kueue's default list)")
	featureGates = flag.String("feature-gates", "", "Kueue feature gates, e.g. UnadmittedWorkloadsObservability=true")
	qps          = flag.Float64("qps", 50, "client queries per second (minimalkueue uses 50)")
	burst        = flag.Int("burst", 100, "client burst (minimalkueue uses 100)")
	startGate    = flag.String("scheduler-start-file", "", "start scheduling only once this file exists (lets a driver load a whole initial state first)")
)

func main() {
	logOptions := zap.Options{Development: true, Level: zapcore.ErrorLevel}
	logOptions.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOptions)))
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "oraclekueue: %v\n", err)
		os.Exit(1)
	}
}

// configuration is the slice of Kueue's manager Configuration the oracle can vary.
func configuration() *configapi.Configuration {
	cfg := &configapi.Configuration{}
	if *fairSharing {
		cfg.FairSharing = &configapi.FairSharing{}
		for _, s := range strings.Split(*strategies, ",") {
			if s = strings.TrimSpace(s); s != "" {
				cfg.FairSharing.PreemptionStrategies = append(cfg.FairSharing.PreemptionStrategies, configapi.PreemptionStrategy(s))
			}
		}
		if len(cfg.FairSharing.PreemptionStrategies) == 0 {
			// Kueue's defaulting of the Configuration API would fill this list in.
			cfg.FairSharing.PreemptionStrategies = []configapi.PreemptionStrategy{
				configapi.LessThanOrEqualToFinalShare, configapi.LessThanInitialShare,
			}
		}
	}
	return cfg
}

func run() error {
	if *featureGates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(*featureGates); err != nil {
			return fmt.Errorf("feature gates: %w", err)
		}
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))
	utilruntime.Must(kueuealpha.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	restConfig.QPS, restConfig.Burst = float32(*qps), *burst

	workloadKind := kueue.SchemeGroupVersion.WithKind("Workload").GroupKind().String()
	concurrency := map[string]int{workloadKind: 5}
	for _, kind := range []string{"LocalQueue", "ClusterQueue", "ResourceFlavor"} {
		concurrency[kueue.SchemeGroupVersion.WithKind(kind).GroupKind().String()] = 1
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:     scheme,
		Controller: crconfig.Controller{SkipNameValidation: new(true), GroupKindConcurrency: concurrency},
		Metrics:    metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		signals := make(chan os.Signal, 2)
		signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
		<-signals
		cancel()
	}()

	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexers: %w", err)
	}
	cfg := configuration()
	var cacheOptions []schdcache.Option
	if cfg.FairSharing != nil {
		cacheOptions = append(cacheOptions, schdcache.WithFairSharing(true))
	}
	cache := schdcache.New(mgr.GetClient(), cacheOptions...)
	requeuer := qcache.NewRequeuer()
	if err := mgr.Add(requeuer); err != nil {
		return fmt.Errorf("requeuer: %w", err)
	}
	expectations := preemptexpectations.New()
	queues := qcache.NewManager(mgr.GetClient(), cache, requeuer, qcache.WithPreemptionExpectations(expectations))
	go queues.CleanUpOnContext(ctx)
	go cache.CleanUpOnContext(ctx)

	opts := core.SetupControllersOpts{PreemptionExpectations: expectations}
	if failed, err := core.SetupControllers(mgr, queues, cache, cfg, opts); err != nil {
		return fmt.Errorf("controller %s: %w", failed, err)
	}
	sched := scheduler.New(queues, cache, mgr.GetClient(), mgr.GetEventRecorder(constants.AdmissionName),
		scheduler.WithPreemptionExpectations(expectations),
		scheduler.WithFairSharing(cfg.FairSharing))
	if err := mgr.Add(gatedRunnable{inner: sched, gate: *startGate}); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return mgr.Start(ctx)
}

// gatedRunnable holds the scheduler back until the gate file exists, so that the first scheduling cycle sees
// every workload of the initial state at once, as a long-running Kueue would, rather than whichever informer
// event happened to arrive first.
type gatedRunnable struct {
	inner manager.Runnable
	gate  string
}

func (g gatedRunnable) Start(ctx context.Context) error {
	for g.gate != "" {
		if _, err := os.Stat(g.gate); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	return g.inner.Start(ctx)
}
