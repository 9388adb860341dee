# Issue 33.4: R converts and prints; the rules live in the Python core, reached through the
# bridge (inst/python/tpuestimatorr_bridge). Every function of the package that calls no bridge
# function (py_bridge() or py_core(), directly or through another function of the package) is
# listed here with what it does: `coercion` (an R argument checked and made the type the core
# takes), `conversion` (a Python result made an R value, or an R value made JSON), `printing`
# (print/summary methods, progress lines, opening a report), `r-side` (what only R has: formulas,
# S3 generics, tfruns's active run, finding and configuring Python, R's exit). No tag says `rule`: the run
# reader, the folder a job reads for a run, the prediction columns and the default runs folder
# are the core's (tpuestimator.runs.frames, serving.prediction_files). A new function that calls
# no bridge function fails here until it is tagged, and a rule has no tag to take.

r_function_tags <- c(
  # coercion
  "%||%" = "coercion", arg_error = "coercion", as_flag = "coercion", as_integer = "coercion",
  as_integer_vector = "coercion", as_nullable_function = "coercion", as_nullable_integer = "coercion",
  as_nullable_path = "coercion", as_nullable_string = "coercion", as_path = "coercion", as_string = "coercion",
  as_file_patterns = "coercion", as_nullable_data_pattern = "coercion", as_flag_list = "coercion",
  as_cluster = "coercion", abs_path_or_null = "coercion", absolute_path = "coercion",
  scalar_or_null = "coercion", drop_nulls = "coercion", override_value = "coercion",
  overrides_from_dots = "coercion", config_source = "coercion", config_input = "coercion", is_table_file = "coercion",
  fit_feature_shape = "coercion", example_dims = "coercion",
  # conversion
  null_to_na = "conversion", r_to_json = "conversion", as_history_df = "conversion", rbind_fill = "conversion",
  new_tpu_run = "conversion", numeric_metrics = "conversion", export_evaluation = "conversion",
  prediction_columns_to_df = "conversion", table_prediction_columns_to_df = "conversion",
  as.list.tpu_config = "conversion", parse_time_prop = "conversion", runs_df_from_columns = "conversion",
  history_df = "conversion", run_column_types = "conversion",
  # printing
  print.summary.tpu_run = "printing", print.tpu_check_report = "printing", print.tpu_config = "printing",
  print.tpu_estimator = "printing", print.tpu_run = "printing", print.tpu_runs_df = "printing",
  print.tpuestimator_missing_module = "printing", summary.tpu_run = "printing", format_progress = "printing",
  progress_callback = "printing", open_report = "printing", default_viewer = "printing",
  early_stopping_note = "printing", relay_warnings = "printing",
  # r-side: what only R has
  table_from_formula = "r-side", eval_term = "r-side", formula_column_name = "r-side",
  apply_table_transforms = "r-side", column_spec = "r-side", tpu_feature_columns = "r-side",
  tfruns_active_flags = "r-side", tfruns_active_run_dir = "r-side", tfruns_copies_model_dir = "r-side",
  tfruns_warn_model_dir = "r-side", foreign_generic = "r-side", forward_to_foreign_generic = "r-side",
  register_foreign_method = "r-side", evaluate = "r-side", evaluate.default = "r-side", train = "r-side",
  train.default = "r-side", export_savedmodel = "r-side", export_savedmodel.default = "r-side",
  .onUnload = "r-side", "$.tpuestimator_missing_module" = "r-side", check_tpuestimator_version = "r-side",
  configure_python = "r-side", configure_virtualenv = "r-side", package_python_env = "r-side",
  python_missing_message = "r-side", install_tpuestimator = "r-side",
  find_python_source = "r-side", tpuestimator_available = "r-side", tpuestimator_extras = "r-side",
  tpuestimator_python = "r-side", example_cache_dir = "r-side", callback_condition = "r-side",
  is_python_keyboard_interrupt = "r-side", r_interrupt = "r-side", tf_logs_wanted = "r-side",
  tensorboard_stop = "r-side", arm_python_exit = "r-side", run_python_exit = "r-side"
)

# The package's functions that reach no bridge function, from their bodies (calls by name).
functions_without_bridge <- function(ns) {
  names <- ls(ns, all.names = TRUE)
  funs <- Filter(function(n) is.function(get(n, envir = ns)) && !is.primitive(get(n, envir = ns)), names)
  calls <- lapply(setNames(funs, funs), function(n) unique(all.names(body(get(n, envir = ns)))))
  reach <- vapply(funs, function(n) any(c("py_bridge", "py_core") %in% calls[[n]]) && n != "py_core", TRUE)
  repeat {
    more <- vapply(funs, function(n) reach[[n]] || any(funs[reach] %in% calls[[n]]), TRUE)
    if (identical(more, reach)) break
    reach <- more
  }
  sort(funs[!reach])
}

test_that("every R function that calls no bridge function converts, coerces or prints (or is listed)", {
  ns <- asNamespace("tpuestimatorr")
  found <- functions_without_bridge(ns)
  expect_identical(setdiff(found, names(r_function_tags)), character(0))  # new: tag it, or use the bridge
  expect_identical(setdiff(names(r_function_tags), found), character(0))  # gone or now bridged: untag it
  expect_true(all(r_function_tags %in% c("coercion", "conversion", "printing", "r-side")))
  # the finder sees a bridge call through another function of the package
  expect_false("as_run_dir" %in% found)  # through tpu_latest_run()
  expect_false("export_class_names" %in% found)
})
