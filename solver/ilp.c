/* solver/ilp.c - µ-cuDNN's WD integer program (§III-C, equations 1-4).
 *
 * Given, for every kernel k, its desirable configurations c (solver_front:
 * time T_k(c), workspace M_k(c)), choose one per kernel:
 *
 *	minimise    sum_k sum_c  w_k T_k(c) x_k,c                (1)
 *	subject to  sum_k sum_c  M_k(c) x_k,c  <= M              (2)   row "ws"
 *	            sum_c x_k,c = 1              for every k     (3)   rows "one_<k>"
 *	            x_k,c in {0, 1}                              (4)   columns "x_<k>_<c>"
 *
 * w_k is how many times kernel k runs per iteration (identical layers
 * share a kernel and its workspace segment; the paper has w = 1 per
 * layer).  Pruning to the fronts loses no optimum: a dominated
 * configuration can always be swapped for the one dominating it without
 * breaking (2) or (3) and without raising (1) (the paper's proof; a unit
 * test pins it).
 *
 * The model is built the way GLPK's own examples build theirs
 * (examples/sample.c, the "assign" and "spxsamp" programs): rows and
 * columns added by name, the constraint matrix loaded from three parallel
 * arrays ia, ja, ar (1-based), glp_intopt with the presolver on, and the
 * status mapped to our own enum.  GLPK is reached through solver_glpk_t
 * (dlopen'ed by interpose/), so this file includes glpk.h for its types
 * and constants only.  Nothing GLPK answers is trusted: the chosen
 * columns are checked against (2) and (3) before they are returned.
 */
#include "solver/solver.h"

#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef glp_prob *(*create_prob_fn)(void);
typedef void (*delete_prob_fn)(glp_prob *);
typedef void (*set_prob_name_fn)(glp_prob *, const char *);
typedef void (*set_obj_dir_fn)(glp_prob *, int);
typedef int (*add_fn)(glp_prob *, int);
typedef void (*set_name_fn)(glp_prob *, int, const char *);
typedef void (*set_bnds_fn)(glp_prob *, int, int, double, double);
typedef void (*set_col_kind_fn)(glp_prob *, int, int);
typedef void (*set_obj_coef_fn)(glp_prob *, int, double);
typedef void (*load_matrix_fn)(glp_prob *, int, const int[], const int[], const double[]);
typedef void (*init_iocp_fn)(glp_iocp *);
typedef int (*intopt_fn)(glp_prob *, const glp_iocp *);
typedef int (*mip_status_fn)(glp_prob *);
typedef double (*mip_obj_val_fn)(glp_prob *);
typedef double (*mip_col_val_fn)(glp_prob *, int);
typedef int (*write_lp_fn)(glp_prob *, const void *, const char *);
typedef int (*term_out_fn)(int);
typedef void (*error_hook_fn)(void (*)(void *), void *);
typedef int (*free_env_fn)(void);

/* GLPK's error hook: an internal error (a bug, an exhausted heap) would
 * otherwise end in abort() inside the application.  glp_error_hook's
 * documented use: jump back, then free GLPK's environment. */
static void on_glpk_error(void *info)
{
	longjmp(*(jmp_buf *)info, 1);
}

static bool table_complete(const solver_glpk_t *g)
{
	return g && g->create_prob && g->delete_prob && g->set_prob_name && g->set_obj_dir &&
	       g->add_rows && g->set_row_name && g->set_row_bnds && g->add_cols &&
	       g->set_col_name && g->set_col_kind && g->set_obj_coef && g->load_matrix &&
	       g->init_iocp && g->intopt && g->mip_status && g->mip_obj_val && g->mip_col_val &&
	       g->write_lp && g->term_out && g->error_hook && g->free_env;
}

static void kname(const solver_wd_t *p, int k, char *buf, size_t len)
{
	if (p->names && p->names[k])
		snprintf(buf, len, "%s", p->names[k]);
	else
		snprintf(buf, len, "k%d", k);
}

solver_status_t solver_wd(const solver_glpk_t *g, const solver_wd_t *p, int *choice,
			  solver_wd_result_t *res)
{
	volatile int ncols = 0;
	int nnz, col, nz;
	/* volatile: read again after a longjmp back from GLPK's error hook */
	int *volatile ia = NULL, *volatile ja = NULL, *volatile kof = NULL, *volatile cof = NULL;
	double *volatile ar = NULL;
	glp_prob *volatile lp = NULL;
	volatile int term_prev = -1;
	jmp_buf on_error;
	union {
		glp_iocp p;
		char pad[4096];   /* room for a GLPK whose control block grew */
	} parm;
	uint64_t minsum = 0;
	volatile solver_status_t st = SOLVER_OK;
	char name[256], kn[200];

	memset(res, 0, sizeof(*res));
	if (!p || !choice || p->nkernels < 1 || !p->fronts)
		return SOLVER_EINVAL;
	for (int k = 0; k < p->nkernels; k++) {
		const solver_front_t *f = &p->fronts[k];

		if (f->n < 1 || !f->c || (p->weight && !(p->weight[k] > 0)))
			return SOLVER_EINVAL;
		ncols += f->n;
		res->unpruned += f->unpruned;
		/* fronts are ordered by workspace ascending: c[0] is the least */
		minsum += f->c[0].ws;
		choice[k] = 0;
	}
	res->nvars = ncols;
	/* Equation 2 cannot hold even with the smallest configurations. */
	if (p->limit != SOLVER_NO_LIMIT && minsum > p->limit)
		return SOLVER_INFEASIBLE;
	if (!table_complete(g))
		return SOLVER_EINVAL;

	nnz = 2 * ncols;
	ia = malloc((size_t)(nnz + 1) * sizeof(*ia));
	ja = malloc((size_t)(nnz + 1) * sizeof(*ja));
	ar = malloc((size_t)(nnz + 1) * sizeof(*ar));
	kof = malloc((size_t)(ncols + 1) * sizeof(*kof));
	cof = malloc((size_t)(ncols + 1) * sizeof(*cof));
	if (!ia || !ja || !ar || !kof || !cof) {
		st = SOLVER_ENOMEM;
		goto out;
	}

	if (setjmp(on_error)) {
		/* GLPK stopped on an internal error: its objects are gone with
		 * its environment, ours are freed below */
		((error_hook_fn)g->error_hook)(NULL, NULL);
		((free_env_fn)g->free_env)();
		lp = NULL;
		term_prev = -1;
		st = SOLVER_EGLPK;
		goto out;
	}
	((error_hook_fn)g->error_hook)(on_glpk_error, &on_error);
	/* GLPK writes progress ("Writing problem data to ...") to stdout,
	 * which is the application's: silence it, and restore its setting */
	term_prev = ((term_out_fn)g->term_out)(GLP_OFF);
	lp = ((create_prob_fn)g->create_prob)();
	if (!lp) {
		st = SOLVER_EGLPK;
		goto out;
	}
	((set_prob_name_fn)g->set_prob_name)(lp, "vmem_wd");
	((set_obj_dir_fn)g->set_obj_dir)(lp, GLP_MIN);

	/* rows: 1 = "ws" (equation 2), 1 + k = "one_<k>" (equation 3) */
	((add_fn)g->add_rows)(lp, 1 + p->nkernels);
	((set_name_fn)g->set_row_name)(lp, 1, "ws");
	if (p->limit == SOLVER_NO_LIMIT)
		((set_bnds_fn)g->set_row_bnds)(lp, 1, GLP_FR, 0.0, 0.0);
	else
		((set_bnds_fn)g->set_row_bnds)(lp, 1, GLP_UP, 0.0, (double)p->limit);
	for (int k = 0; k < p->nkernels; k++) {
		kname(p, k, kn, sizeof(kn));
		snprintf(name, sizeof(name), "one_%s", kn);
		((set_name_fn)g->set_row_name)(lp, 2 + k, name);
		((set_bnds_fn)g->set_row_bnds)(lp, 2 + k, GLP_FX, 1.0, 1.0);
	}

	/* columns: x_<k>_<c>, binary (equation 4), cost w_k T_k(c) (equation 1) */
	((add_fn)g->add_cols)(lp, ncols);
	col = 0;
	nz = 0;
	for (int k = 0; k < p->nkernels; k++) {
		const solver_front_t *f = &p->fronts[k];
		double w = p->weight ? p->weight[k] : 1.0;

		kname(p, k, kn, sizeof(kn));
		for (int c = 0; c < f->n; c++) {
			col++;
			kof[col] = k;
			cof[col] = c;
			snprintf(name, sizeof(name), "x_%s_%d", kn, c);
			((set_name_fn)g->set_col_name)(lp, col, name);
			((set_col_kind_fn)g->set_col_kind)(lp, col, GLP_BV);
			((set_obj_coef_fn)g->set_obj_coef)(lp, col, w * f->c[c].time);
			nz++, ia[nz] = 1, ja[nz] = col, ar[nz] = (double)f->c[c].ws;
			nz++, ia[nz] = 2 + k, ja[nz] = col, ar[nz] = 1.0;
		}
	}
	((load_matrix_fn)g->load_matrix)(lp, nz, ia, ja, ar);
	if (p->lp_path)
		res->lp_written = ((write_lp_fn)g->write_lp)(lp, NULL, p->lp_path) == 0;

	memset(&parm, 0, sizeof(parm));
	((init_iocp_fn)g->init_iocp)(&parm.p);
	parm.p.msg_lev = GLP_MSG_OFF;
	parm.p.presolve = GLP_ON;
	parm.p.mip_gap = p->mip_gap > 0 ? p->mip_gap : 0.0;
	parm.p.tm_lim = (int)((p->time_limit_s > 0 ? p->time_limit_s : 10.0) * 1000.0);
	res->glpk_rc = ((intopt_fn)g->intopt)(lp, &parm.p);
	res->glpk_status = ((mip_status_fn)g->mip_status)(lp);
	if (res->glpk_status == GLP_NOFEAS || res->glpk_rc == GLP_ENOPFS) {
		st = SOLVER_INFEASIBLE;
		goto out;
	}
	/* optimal, within the gap asked for, or the best found when the time
	 * limit struck */
	if ((res->glpk_rc != 0 && res->glpk_rc != GLP_ETMLIM && res->glpk_rc != GLP_EMIPGAP) ||
	    (res->glpk_status != GLP_OPT && res->glpk_status != GLP_FEAS)) {
		st = SOLVER_EGLPK;
		goto out;
	}
	res->optimal = (res->glpk_rc == 0 && res->glpk_status == GLP_OPT) ||
		       res->glpk_rc == GLP_EMIPGAP;

	/* read x back, and check (2) and (3) ourselves */
	for (int k = 0; k < p->nkernels; k++)
		choice[k] = -1;
	res->objective = 0;
	res->ws = 0;
	for (col = 1; col <= ncols; col++) {
		double v = ((mip_col_val_fn)g->mip_col_val)(lp, col);
		int k = kof[col];

		if (!(v > 0.5))
			continue;
		if (choice[k] >= 0) {
			st = SOLVER_EGLPK;   /* two configurations for one kernel */
			goto out;
		}
		choice[k] = cof[col];
	}
	for (int k = 0; k < p->nkernels; k++) {
		const solver_config_t *c;

		if (choice[k] < 0) {
			st = SOLVER_EGLPK;
			goto out;
		}
		c = &p->fronts[k].c[choice[k]];
		res->objective += (p->weight ? p->weight[k] : 1.0) * c->time;
		res->ws += c->ws;
	}
	if (p->limit != SOLVER_NO_LIMIT && res->ws > p->limit)
		st = SOLVER_EGLPK;
out:
	if (st != SOLVER_OK && choice)
		for (int k = 0; k < p->nkernels; k++)
			choice[k] = 0;
	if (lp)
		((delete_prob_fn)g->delete_prob)(lp);
	if (term_prev >= 0)
		((term_out_fn)g->term_out)(term_prev);
	if (table_complete(g))
		((error_hook_fn)g->error_hook)(NULL, NULL);
	free((void *)ia);
	free((void *)ja);
	free((void *)ar);
	free((void *)kof);
	free((void *)cof);
	return st;
}
