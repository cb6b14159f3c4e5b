package kube

// PoolSize is the number of prestarted pods waiting or being created.
func PoolSize(f *Factory) int { return f.pool.size() }
