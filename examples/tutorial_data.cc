#include "examples/tutorial_data.h"

namespace ipuflow::examples {

absl::StatusOr<TutorialData> LoadTutorialData(int64_t train_limit,
                                              int64_t test_limit) {
  feeds::FashionMnistOptions options;
  options.normalize = true;
  TutorialData data;
  options.limit = train_limit;
  ASSIGN_OR_RETURN(data.train,
                   feeds::LoadFashionMnist(feeds::Split::kTrain, options));
  options.limit = test_limit;
  ASSIGN_OR_RETURN(data.test,
                   feeds::LoadFashionMnist(feeds::Split::kTest, options));
  return data;
}

}  // namespace ipuflow::examples
