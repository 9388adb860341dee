#' Train a model from a configuration
#'
#' Runs one job with the Python core (`tpuestimator.jobs.job.run_job()`): trains,
#' evaluates every `eval.every_n_steps` and at the end, exports a SavedModel and
#' records the run in tfruns's format under the runs folder (`runs/` by default,
#' see [tpu_ls_runs()]). Progress lines (`train | step: 200/1000 | steps/sec: 51.2 |
#' loss: 0.3100`) are printed live in the R console through an R callback.
#'
#' @section Model functions written in R:
#' `model_fn` may be an R function `function(params)` that builds a Keras model
#' through reticulate and returns `tpuestimator$ModelSpec(model = ..., loss = ...,
#' optimizer = ...)`; `params` holds the configuration's `params` plus
#' `batch_size` (per replica), `global_batch_size`, `num_replicas`, `device` and
#' `num_classes`/`image` when the data defines them. See
#' `system.file("examples", "keras_model_fn.R", package = "tpuestimatorr")`.
#'
#' @section Hooks written in R:
#' `hooks` may hold R functions `function(event, info)` (and Python
#' `tpuestimator.hooks.Hook` objects). They run on the host between device loops
#' with the events `"begin"`, `"before_loop"`, `"after_loop"` (`info` holds `step`,
#' `loss`, `steps_per_sec`, `examples_per_sec`), `"after_eval"` (`step`, `metrics`),
#' `"after_export"` (`step`, `export_dir`), `"end"` and `"on_exception"`
#' (`error`). A hook stops training after the current loop by returning `"stop"`.
#'
#' @section Progress:
#' The progress callback gets the events `"begin"` (`step`, `max_steps`),
#' `"loop"` (`step`, `max_steps`, `loss`, `steps_per_sec`, and once an
#' evaluation ran during training `eval_loss`, the latest evaluation's loss,
#' printed as `eval loss` beside the training loss), `"eval"` (`step`,
#' `metrics`) and `"end"`.
#'
#' An error inside an R model function or hook stops training and is signalled in
#' R as a `tpuestimator_callback_error` carrying the R message (see
#' [tpuestimator_conditions]).
#'
#' @section tfruns:
#' Inside `tfruns::training_run()` (when tfruns is installed and a run is
#' active) the record is written into `tfruns::run_dir()` instead of a second
#' run folder, so tfruns's own run holds the metrics, evaluation, TensorBoard logs
#' and export. The run's flags apply: what the script declared with
#' `tfruns::flags()` (with the values `training_run(flags = )` or
#' `tuning_run()` gave) overrides the configuration, as `flags = FLAGS` would
#' (see `flags`).
#'
#' @param cfg A [tpu_config()] object, a path to a YAML/JSON configuration file, or
#'   a named list of sections.
#' @param model_fn `NULL` (use the configuration's `model`), an R function
#'   `function(params)` returning a `ModelSpec`, a Python callable, or a string
#'   naming a built-in model (`"cnn"`, `"mlp"`, ...) or `"module:function"`. With a
#'   function, a list configuration may leave out `model` (it is recorded as
#'   `"r:model_fn"`).
#' @param hooks `NULL`, an R function `function(event, info)`, a Python
#'   `tpuestimator.hooks.Hook`, or a list of them.
#' @param model_dir Folder of checkpoints and exports. Default: the configuration's
#'   `run.model_dir`, else `models/<name>`.
#' @param runs_dir Folder of run records. Default: the configuration's
#'   `run.runs_dir` (`"runs"`).
#' @param verbose Print progress lines in the console.
#' @param ... Configuration overrides, named as in [tpu_config()]:
#'   `train.max_steps = 500L` (unnamed arguments would bind to the arguments above).
#' @param flags Flags that override configuration fields: a named list, such as
#'   the `FLAGS` that `tfruns::flags()` returns. A flag's name is a field's
#'   dotted path (`params.learning_rate`, `train.max_steps`) or a short name
#'   looked up as a top-level field (`model`), then in the configuration's
#'   `params` (`learning_rate`), then in `train` (`max_steps`,
#'   `batch_size`), then in `eval`. A name that is none of these is an error
#'   listing the fields (keep a flag your script uses for itself out:
#'   `flags = FLAGS[c("learning_rate")]`). Flags win over `...`. Default:
#'   inside `tfruns::training_run()`, the active run's flags (those the script
#'   declared with `tfruns::flags()`); elsewhere none. `flags = list()` applies
#'   none.
#' @param export Export a SavedModel at the end (as configured under `export`).
#' @param progress An optional extra R function `function(event, info)` called
#'   with every progress event (after the console printer).
#' @param resume Continue the model dir's checkpoint even when it was trained
#'   with other settings. By default such a model dir is an error naming the
#'   settings that differ (a rerun with the same settings resumes; see "Model dirs
#'   and checkpoint reuse" in docs/RUN_FORMAT.md).
#' @param cluster `NULL` (train in this R session), or a list starting a local
#'   cluster of processes on this machine, as `tpuestimator cluster` does:
#'   `list(workers = 2L)` plus optionally `ps` (parameter servers, for
#'   `run.strategy: parameter_server`), `evaluator` (`TRUE` adds a side-car
#'   evaluator task) and `restarts` (whole-cluster restarts after a task fails;
#'   training resumes from the chief's latest checkpoint). Each task runs
#'   `tpuestimator train` with its own `TF_CONFIG`; the configuration's
#'   `run.strategy` must be `multi_worker` (or `parameter_server` with `ps`). The
#'   tasks' log lines stream to the console's standard error with a `[worker 0]`
#'   prefix. The model function must be one the configuration names (an R
#'   function cannot run in the tasks' processes), and R hooks and `progress` do
#'   not apply. The returned run holds the chief's run record, model dir, final
#'   metrics and global step (`history` is read from the run record with
#'   [tpu_ls_runs()]). A failing task stops the cluster with a `tpuestimator_error`
#'   naming the task and its last log lines. See docs/scaling-out.md.
#' @param data With a formula as `cfg`: the data frame its columns come from.
#' @param label With a data frame as `cfg`: the column to predict.
#' @param model With a data frame or formula: the canned model, `"linear"`,
#'   `"dnn"` (default) or `"wide_and_deep"`, a classifier for a factor,
#'   character or logical label and for integers with at most 20 distinct values
#'   (at most half as many as rows), a regressor otherwise (a message says which
#'   and why).
#'   Otherwise a model name that replaces the configuration's `model`.
#' @param feature_columns With a data frame: per-column fields replacing the
#'   inferred feature columns (see [tpu_feature_columns()]).
#' @param missing With a data frame: a missing-value policy for every column
#'   (`"mean"`, `"zero"`, `"oov"`) or a named list of them
#'   (`list(Home = "oov", Income = "mean")`). `"mean"` for all columns gives a
#'   number column the training rows' mean and a category, character or logical
#'   column the out-of-vocabulary bucket. Without one, the NAs of the feature
#'   columns are one error listing every such column, its count and first rows
#'   (numbered from 1, as R does), with both fixes written in R.
#' @param split With a data frame: the fraction of rows held out for evaluation,
#'   strictly between 0 and 1, or a data frame of evaluation rows with the same columns.
#' @param task With a data frame: `"classification"` or `"regression"` (default
#'   inferred from the label).
#' @param early_stopping With a data frame: `TRUE` (default) evaluates on the
#'   held-out rows every `train.max_steps / 10` steps or every epoch, whichever
#'   is sooner, stops when the held-out loss has not improved for 5 evaluations,
#'   and evaluates and exports the model of the best evaluation (a message says
#'   where it stopped and which step was best); `FALSE` trains every step and
#'   exports the last; a list sets the rule's fields, the others keeping these
#'   defaults: `list(patience = 10L)`, `list(metric = "accuracy")` (`mode`
#'   `"min"` or `"max"` follows the metric), `list(min_delta = 0.01)`.
#' @section Tables:
#' `tpu_train(mtcars, label = "mpg")` or `tpu_train(mpg ~ ., data = mtcars)`
#' trains a canned model on a data frame: the rows are split (`split` held out
#' for evaluation), the feature columns inferred from the training rows
#' (numbers normalized, factors and character columns looked up in their
#' vocabulary with an out-of-vocabulary bucket, logicals as ids), written with
#' the records into `model_dir/data/manifest.json` (`model_dir`: default
#' `models/table-<label>-<model>/model`; a folder trained on other rows is refused
#' unless `resume = TRUE`; `Date` and `POSIXct` columns are read as days and seconds
#' since 1970-01-01), and the model exported so
#' that [predict()] takes a data frame. Configuration overrides go in `...`
#' (`train.max_steps = 500L`, `params.hidden_units = list(32L, 16L)`).
#' `flags` apply as for a configuration; the short names of the canned models'
#' parameters work although the table's configuration leaves them at their
#' defaults: `learning_rate`, `optimizer`, `hidden_units`, `dropout`,
#' `batch_norm`, `l2_regularization` (and `linear_learning_rate`,
#' `linear_optimizer` for `"wide_and_deep"`). An unknown flag is refused before the table is written.
#' A formula is read as [stats::terms()] reads it: `.` is every other column,
#' `-` drops terms (`mpg ~ . - carb`), `a:b` of two categories is a crossed
#' column (`a` and `b` stay inputs) and of two numbers their product (the column
#' [stats::model.matrix()] makes), and a function of columns (`log(hp)`,
#' `I(wt^2)`) is computed in R as a new column (`log_hp`, with a message): the
#' export then expects that column to hold the transformed value, and
#' [predict()] on the run computes it from the columns. A function on the left,
#' a matrix term (`poly()`), an `offset()` or a category crossed with a number
#' is refused with the reason.
#' The run is recorded where every run is: `runs_dir`, by default `runs/` of
#' the working folder (the option `tfruns.runs_dir`), where [tpu_ls_runs()] and
#' `tfruns::ls_runs()` look; the table and model go to `model_dir`.
#' Inside `tfruns::training_run()` the record goes into tfruns's run and,
#' unless `model_dir` is given, the table and model into
#' `<runs folder>/.models/<run>` (a folder per run, which tfruns does not copy).
#' @return A `tpu_run` object (a list): `run_dir`, `model_dir`, `export_dir`,
#'   `metrics` (final evaluation, a named list), `history` (a data frame, one row
#'   per evaluation, with `step`), `global_step` and `config` (the resolved
#'   configuration). It has [print()] and [summary()] methods and can be passed to
#'   [tpu_evaluate()], [tpu_predict()], [tpu_export()], [tpu_view_run()] and
#'   [tpu_tensorboard()].
#' @seealso [tpu_config()], [tpu_evaluate()], [tpu_predict()], [tpu_ls_runs()],
#'   [tpu_estimator()]
#' @examples
#' if (tpuestimator_available()) {
#'   out <- tempfile("digits-")
#'   run <- tpu_train(tpu_example("digits", dir = file.path(out, "example")),
#'                    train.max_steps = 100L,
#'                    model_dir = file.path(out, "model"), runs_dir = file.path(out, "runs"))
#'   run
#'   run$metrics$accuracy
#'   tpu_ls_runs(file.path(out, "runs"))
#' }
#' \dontrun{
#' # A model function written in R
#' keras <- reticulate::import("keras")
#' model_fn <- function(params) {
#'   model <- keras$Sequential(list(
#'     keras$layers$Input(shape = list(8L, 8L, 1L)),
#'     keras$layers$Flatten(),
#'     keras$layers$Dense(64L, activation = "relu"),
#'     keras$layers$Dense(as.integer(params$num_classes))
#'   ))
#'   tpuestimator$ModelSpec(
#'     model = model,
#'     loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE, reduction = NULL),
#'     optimizer = keras$optimizers$Adam(params$learning_rate),
#'     metrics = list(accuracy = keras$metrics$SparseCategoricalAccuracy())
#'   )
#' }
#' run <- tpu_train(tpu_example("digits"), model_fn = model_fn,
#'                  hooks = function(event, info) if (event == "after_eval") print(info$metrics))
#' }
#' @export
tpu_train <- function(cfg, model_fn = NULL, hooks = NULL, model_dir = NULL, runs_dir = NULL,
                      verbose = getOption("tpuestimatorr.verbose", TRUE), ..., flags = NULL, export = TRUE,
                      progress = NULL, resume = FALSE, cluster = NULL, data = NULL, label = NULL,
                      model = NULL, feature_columns = NULL, missing = NULL, split = 0.2, task = NULL,
                      early_stopping = TRUE) {
  # base::missing(), not the `missing` argument of the tables
  if (base::missing(flags)) flags <- tfruns_active_flags()  # defined in tfruns.R; NULL outside training_run()
  flags <- as_flag_list(flags)
  verbose <- as_flag(verbose, "verbose")
  export <- as_flag(export, "export")
  resume <- as_flag(resume, "resume")
  progress <- as_nullable_function(progress, "progress")
  overrides <- overrides_from_dots(...)
  if (inherits(cfg, "formula") || is.data.frame(cfg)) {  # a table (tables.R)
    table <- if (inherits(cfg, "formula")) table_from_formula(cfg, data) else list(data = cfg, label = label)
    if (is.null(table$label)) {
      arg_error("label", NULL, "the name of the column to predict (or a formula such as mpg ~ . with data =)")
    }
    if (!is.null(model_fn)) arg_error("model_fn", model_fn, "NULL with a data frame: name a canned model in `model`")
    # the formula's crossed columns, then the user's columns (which win, NULL included)
    feature_columns <- c(table$feature_columns[setdiff(names(table$feature_columns), names(feature_columns))],
                         feature_columns)
    return(train_table_run(table$data, table$label, model, if (length(feature_columns)) feature_columns, missing,
                           split, task, overrides, as_nullable_path(model_dir, "model_dir"),
                           as_nullable_path(runs_dir, "runs_dir"), export, verbose, progress, flags,
                           transforms = table$transforms, transforms_env = table$env,
                           early_stopping = early_stopping))
  }
  if (!is.null(model)) overrides <- c(overrides, paste0("model=", as_string(model, "model")))
  if (is.character(model_fn)) {
    overrides <- c(overrides, paste0("model=", as_string(model_fn, "model_fn")))
    model_fn <- NULL
  }
  model_fn <- as_nullable_function(model_fn, "model_fn")
  if (!is.null(model_fn) && is.list(cfg) && !inherits(cfg, "tpu_config") && is.null(cfg$model)) {
    # The config needs a `model`; a 'module:function'-shaped placeholder names the R function.
    cfg$model <- "r:model_fn"
  }
  hooks <- as_hook_list(hooks)
  model_dir <- as_nullable_path(model_dir, "model_dir")
  runs_dir <- as_nullable_path(runs_dir, "runs_dir")
  cluster <- as_cluster(cluster)
  if (!is.null(cluster)) {
    if (!is.null(model_fn)) {
      arg_error("model_fn", model_fn, paste(
        "NULL or a model name with `cluster` (each task is a separate `tpuestimator train` process,",
        "where an R function cannot run)"))
    }
    if (length(hooks)) arg_error("hooks", hooks, "NULL with `cluster` (hooks run in this R session only)")
    if (!is.null(progress)) arg_error("progress", progress, "NULL with `cluster` (the tasks' logs stream instead)")
  }
  src <- resolve_config(cfg, overrides)

  quiet_python_console()  # defined in console.R
  if (!is.null(cluster)) {
    args <- c(list(src$py_source, overrides = as.list(src$overrides), export = export, resume = resume,
                   verbose = verbose), cluster)
    if (!is.null(flags)) args$flags_json <- r_to_json(flags)  # mapped where the cluster loads the config, once
    if (!is.null(model_dir)) args$model_dir <- model_dir
    if (!is.null(runs_dir)) args$runs_dir <- runs_dir
    run <- tpu_run_from_result(with_python(do.call(py_bridge()$run_cluster, args)))
    if (verbose && !is.null(run$run_dir)) message("run recorded in ", run$run_dir)
    return(run)
  }
  # an unchanged tpu_config() goes as the config it was validated as, with only this call's overrides
  args <- c(if (is.null(src$job)) list(src$py_source, overrides = as.list(src$overrides))
            else list(src$job, overrides = as.list(overrides)),
            list(export = export), job_callbacks(model_fn, hooks, progress, verbose))
  if (!is.null(flags)) args$flags_json <- r_to_json(flags)  # mapped where the config is loaded, once
  if (!is.null(model_dir)) args$model_dir <- model_dir
  if (!is.null(runs_dir)) args$runs_dir <- runs_dir
  if (resume) args$resume <- TRUE

  args$run_dir <- tfruns_active_run_dir()  # NULL (left out) outside tfruns::training_run()

  result <- with_python(do.call(py_bridge()$run_job, args))
  run <- tpu_run_from_result(result)
  tfruns_dir <- args$run_dir
  if (!is.null(tfruns_dir)) tfruns_warn_model_dir(run$model_dir, tfruns_dir)  # defined in tfruns.R
  if (verbose) message("run recorded in ", run$run_dir)
  run
}

# run_job()'s model_fn, hooks and progress arguments from R values (R functions wrapped so
# that their errors stop the job and reach R).
job_callbacks <- function(model_fn, hooks, progress, verbose) {
  args <- list()
  if (!is.null(model_fn)) {
    args$model_fn <- if (is.function(model_fn)) {
      py_bridge()$r_callback(reticulate::r_to_py(wrap_r_callback(model_fn, "model function"), convert = TRUE))
    } else {
      model_fn
    }
  }
  if (length(hooks)) args$hooks <- reticulate::r_to_py(hooks, convert = FALSE)
  args$progress <- py_bridge()$r_callback(reticulate::r_to_py(
    wrap_r_callback(progress_callback(verbose, progress), "progress callback"),
    convert = TRUE
  ))
  args
}

# `flags` of tpu_train(): NULL, or a named list of single values (tfruns's FLAGS is one).
as_flag_list <- function(flags) {
  if (is.null(flags) || !length(flags)) return(NULL)
  ok <- is.list(flags) && !is.null(names(flags)) && all(nzchar(names(flags))) &&
    all(vapply(flags, function(v) is.atomic(v) && length(v) == 1L && !is.na(v), logical(1)))
  if (!ok) {
    arg_error("flags", flags,
              "a named list of single values, e.g. FLAGS from tfruns::flags() or list(learning_rate = 0.01)")
  }
  lapply(unclass(flags), function(v) if (is.factor(v)) as.character(v) else v)
}

as_hook_list <- function(hooks) {
  if (is.null(hooks)) return(list())
  if (is.function(hooks) || inherits(hooks, "python.builtin.object")) hooks <- list(hooks)
  if (!is.list(hooks)) {
    arg_error("hooks", hooks, "NULL, a function(event, info), a Python Hook, or a list of them")
  }
  lapply(seq_along(hooks), function(i) {
    h <- hooks[[i]]
    if (is.function(h)) {
      fn <- py_bridge()$r_callback(reticulate::r_to_py(wrap_r_callback(h, paste0("hook ", i)), convert = TRUE))
      # Wrapped here so every event (after_eval, after_export too) reaches the R function.
      py_bridge()$callable_hook(fn, name = paste0("r_hook_", i))
    } else if (inherits(h, "python.builtin.object")) {
      h
    } else {
      arg_error(paste0("hooks[[", i, "]]"), h, "a function(event, info) or a Python Hook")
    }
  })
}

# `cluster` of tpu_train(): NULL, or list(workers =, ps =, evaluator =, restarts =) checked.
as_cluster <- function(cluster) {
  if (is.null(cluster)) return(NULL)
  allowed <- c("workers", "ps", "evaluator", "restarts")
  if (!is.list(cluster) || is.null(names(cluster)) || any(!nzchar(names(cluster))) ||
        !all(names(cluster) %in% allowed) || !"workers" %in% names(cluster)) {
    arg_error("cluster", cluster, paste0(
      "NULL or a named list with `workers` and optionally ", paste0("`", allowed[-1], "`", collapse = ", "),
      " (e.g. list(workers = 2L))"))
  }
  out <- list(workers = as_integer(cluster$workers, "cluster$workers"),
              ps = as_integer(cluster$ps %||% 0L, "cluster$ps"),
              evaluator = as_flag(cluster$evaluator %||% FALSE, "cluster$evaluator"),
              restarts = as_integer(cluster$restarts %||% 0L, "cluster$restarts"))
  if (out$workers < 1L) arg_error("cluster$workers", cluster$workers, "at least 1")
  if (out$ps < 0L) arg_error("cluster$ps", cluster$ps, "0 or more")
  if (out$restarts < 0L) arg_error("cluster$restarts", cluster$restarts, "0 or more")
  out
}
