int64_t rumus_optim_find(const char *name);
void rumus_adam_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *m, int64_t mo,
                    char *v, int64_t vo, double lr, double beta1, double beta2, double eps, double weight_decay,
                    int decoupled, double step_size, double sqrt_bc2);
void rumus_sgd_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *buf,
                   int64_t bo, double lr, double momentum, double dampening, double weight_decay, int nesterov,
                   int first);
