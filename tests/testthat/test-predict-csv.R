# tpu_predict() on a table model's .csv file (README "Tables"): the file is read a chunk at a
# time (here 16 rows, so the 50-row file takes 4 chunks), and the predictions equal those of
# the same table predicted whole as a data frame, in the file's row order; a bad value in a
# later chunk is reported with its row counted from 1 over the whole file, nothing written.

test_that("tpu_predict() of a CSV file reads it in chunks and predicts as the whole data frame does", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  sizes <- size_levels                            # not alphabetical: the training's levels kept
  run <- shared_size_classifier()                 # helper-tables-shared.R: code, weight -> size
  set.seed(1)
  newdata <- data.frame(code = sample(c("s", "m", "l", "unseen"), 50, replace = TRUE),
                        weight = round(runif(50, 0, 4), 2))
  path <- file.path(work, "new.csv")
  utils::write.csv(newdata, path, row.names = FALSE)
  whole <- predict(run, newdata)
  chunked <- quietly(tpu_predict(run, path, chunk_rows = 16L, batch_size = 5L))
  expect_identical(nrow(chunked), 50L)
  expect_identical(names(chunked), names(whole))
  expect_identical(chunked$class, whole$class)                       # row order kept, the factor's levels
  expect_identical(levels(chunked$class), sizes)
  expect_identical(chunked$class_id, whole$class_id)
  probs <- paste0("prob_", sizes)
  expect_equal(as.matrix(chunked[, probs]), as.matrix(whole[, probs]), tolerance = 1e-6)
  # into a file, chunk by chunk: the table's rows numbered from 0 in `index`, the same predictions
  out <- file.path(work, "pred.csv")
  written_to <- quietly(tpu_predict(run$export_dir, path, out = out, chunk_rows = 16L))
  expect_identical(as.character(written_to), out)
  expect_identical(attributes(written_to), list(rows = 50L, chunks = 4L))   # 16 + 16 + 16 + 2 rows
  written <- utils::read.csv(out, stringsAsFactors = FALSE)
  expect_identical(written$index, 0:49)
  expect_identical(written$class, as.character(whole$class))
  expect_equal(as.matrix(written[, probs]), as.matrix(whole[, probs]), tolerance = 1e-6, ignore_attr = TRUE)
  # a word in the numeric column on the file's row 37 (the third chunk): that row, nothing written
  bad <- newdata
  bad$weight <- as.character(bad$weight)
  bad$weight[37] <- "heavy"
  bad_path <- file.path(work, "bad.csv")
  utils::write.csv(bad, bad_path, row.names = FALSE)
  bad_out <- file.path(work, "bad-pred.csv")
  expect_error(quietly(tpu_predict(run, bad_path, out = bad_out, chunk_rows = 16L)),
               "column 'weight' row 37 holds 'heavy'")
  expect_false(file.exists(bad_out))
  expect_error(tpu_predict(run, path, chunk_rows = 0L), "chunk_rows")
  expect_error(tpu_predict(run, file.path(work, "none.csv")), "an existing .csv or .parquet file")
})
